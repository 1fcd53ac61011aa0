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
#include "dlock/adapters/hold_stacks.h"
#include "dlock/client.h"
#include "dlock/hold.h"
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
  // Where unlock() reports a failed release. Empty: the process default
  // (SetDefaultReleaseErrorHook, dlock/hold.h).
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
//    backend is unreachable, nothing was locked by this owner), the error
//    goes to the release-error hook (a loss too, unlike a Hold's
//    destructor); not when the client was closed, which released the hold
//    already (C13).
//
// Like std::recursive_mutex, the owner may lock again; each lock() needs its
// unlock(). Not movable (like std::mutex); hold it by unique_ptr to move it.
// Safe to share between threads; each thread is its own owner by default.
//
// Each lock() keeps the dlock::Hold that Acquire() returned: by default on a
// stack of the calling thread, with an owner_token on one stack that every
// thread shares. unlock() releases the innermost hold of that stack.
// Destroying the mutex releases what is still locked through it, as the
// Holds' destructors do.
class DistributedMutex {
 public:
  // The short path: the mutex of lock `name` of `client`, which must outlive
  // it. Throws std::system_error (std::errc::invalid_argument) for a name
  // C15 refuses, as lock() throws for what goes wrong later:
  //
  //   dlock::DistributedMutex account(*client, "account/17");
  //   std::scoped_lock hold(account);
  DistributedMutex(LockClient& client, absl::string_view name,
                   MutexOptions options = {});
  DistributedMutex(std::unique_ptr<DistributedLock> lock,
                   MutexOptions options = {});
  // The same as a Status: InvalidArgument for a bad name (C15).
  static absl::StatusOr<std::unique_ptr<DistributedMutex>> Create(
      LockClient& client, absl::string_view name, MutexOptions options = {});

  DistributedMutex(const DistributedMutex&) = delete;
  DistributedMutex& operator=(const DistributedMutex&) = delete;

  void lock();
  bool try_lock();
  void unlock() noexcept;

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return TryLockFor(internal::ToAbsl(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& when) {
    return TryLockFor(internal::ToAbsl(when - Clock::now()));
  }

  // The fencing token of the current (innermost) hold of this owner (C8):
  // of the calling thread, or of the owner_token. FailedPrecondition when it
  // holds nothing through this mutex (IsNotOwner) or lost it (IsLost).
  absl::StatusOr<uint64_t> fencing_token() const;
  // The local view of that hold: held or lost; kNotHeld when there is none.
  LockState state() const;

 private:
  bool TryLockFor(absl::Duration wait);
  AcquireOptions MakeAcquireOptions(absl::Duration wait) const;

  const std::unique_ptr<DistributedLock> lock_;
  const MutexOptions options_;
  // The holds of each owner, innermost last: per thread for the default
  // owner, or the one stack of options_.owner_token.
  internal::HoldStacks holds_;
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_STD_MUTEX_H_
