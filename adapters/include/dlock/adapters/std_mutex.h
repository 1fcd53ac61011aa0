// Copyright dlock authors. A distributed lock as a standard mutex, so that
// std::unique_lock, std::scoped_lock, std::lock and try_lock_for work on it.
#ifndef DLOCK_ADAPTERS_STD_MUTEX_H_
#define DLOCK_ADAPTERS_STD_MUTEX_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/adapters/errors.h"
#include "dlock/client.h"
#include "dlock/lock.h"

namespace dlock {

struct MutexOptions {
  // The lease of each hold. Unset: renewed by the client's watchdog (C7).
  std::optional<absl::Duration> lease;
  // Bound for lock(): past it, lock() throws std::errc::timed_out.
  absl::Duration lock_wait = absl::InfiniteDuration();
  // Owner token (C6). Empty: the calling thread of this client, which is
  // what a std mutex means; set it to hand the lock between threads.
  std::string owner_token;
  // Where unlock() reports a failed release. Empty: the default hook.
  ReleaseErrorHook on_release_error;
  // Called on the watchdog's thread when a hold is lost.
  LockLostCallback on_lost;
};

// Meets the standard Lockable and TimedLockable requirements.
//
// Because those interfaces cannot return a Status:
//  - lock(), try_lock(), try_lock_for() and try_lock_until() throw
//    std::system_error whose code() is in dlock::StatusCategory() (compare it
//    with std::errc::timed_out, host_unreachable, ...) for every failure
//    other than "another owner holds it", for which the try_ forms return
//    false. This is the std contract: std::mutex::lock() throws too, and
//    std::lock()/std::scoped_lock unlock what they took before rethrowing.
//  - unlock() never throws. When the release fails (the lock was lost, the
//    backend is unreachable), the error goes to the release-error hook.
//
// Like std::recursive_mutex, the owner may lock again; each lock() needs its
// unlock(). Not movable (like std::mutex); hold it by unique_ptr to move it.
// Safe to share between threads; each thread is its own owner by default.
class DistributedMutex {
 public:
  DistributedMutex(std::unique_ptr<DistributedLock> lock,
                   MutexOptions options = {});
  // InvalidArgument for a bad name (C15).
  static absl::StatusOr<std::unique_ptr<DistributedMutex>> Create(
      LockClient& client, absl::string_view name, MutexOptions options = {});

  DistributedMutex(const DistributedMutex&) = delete;
  DistributedMutex& operator=(const DistributedMutex&) = delete;

  void lock();
  bool try_lock();
  void unlock() noexcept;

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return TryLockFor(ToAbsl(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& when) {
    return TryLockFor(ToAbsl(when - Clock::now()));
  }

  // The fencing token of the current hold of this owner (C8).
  absl::StatusOr<uint64_t> fencing_token() const;
  // The local view of this owner's hold: held, lost, or not held.
  LockState state() const;
  DistributedLock& handle() { return *lock_; }

 private:
  template <class Rep, class Period>
  static absl::Duration ToAbsl(const std::chrono::duration<Rep, Period>& d) {
    using Nanos = std::chrono::duration<double, std::nano>;
    const double nanos = std::chrono::duration_cast<Nanos>(d).count();
    if (nanos <= 0) return absl::ZeroDuration();
    // Saturate instead of overflowing (duration::max() means "forever").
    if (nanos >= 9e18) return absl::InfiniteDuration();
    return absl::Nanoseconds(static_cast<int64_t>(nanos));
  }

  bool TryLockFor(absl::Duration wait);
  AcquireOptions MakeAcquireOptions(absl::Duration wait) const;

  const std::unique_ptr<DistributedLock> lock_;
  const MutexOptions options_;
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_STD_MUTEX_H_
