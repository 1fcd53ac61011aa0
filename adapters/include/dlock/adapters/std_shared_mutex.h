// Copyright dlock authors. A distributed read-write lock as a standard
// shared mutex, so that std::shared_lock and std::unique_lock work on it.
#ifndef DLOCK_ADAPTERS_STD_SHARED_MUTEX_H_
#define DLOCK_ADAPTERS_STD_SHARED_MUTEX_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/adapters/hold_stacks.h"
#include "dlock/adapters/std_mutex.h"
#include "dlock/client.h"
#include "dlock/rw_lock.h"

namespace dlock {

// Meets the standard SharedTimedLockable requirements over one
// ReadWriteLock (dlock/rw_lock.h): lock() and its try_ forms take the lock
// exclusively (its writer, the same lock as DistributedMutex's of the
// name), lock_shared() and its try_ forms as one of its readers.
//
// The conventions are DistributedMutex's (std_mutex.h), with MutexOptions:
// failures other than "another owner holds it" throw std::system_error in
// dlock::StatusCategory(); unlock() and unlock_shared() never throw and send
// a failed release to the release-error hook; the owner is the calling
// thread (or options.owner_token), which may lock again (each lock needs
// its unlock). A writer may also lock_shared() (a downgrade when it then
// unlocks the write). An upgrade, lock() while this owner holds the lock
// shared, throws std::system_error with std::errc::
// resource_deadlock_would_occur, as std::shared_mutex implementations
// report a self-deadlock: two readers upgrading would wait for each other
// forever. Not movable. Safe to share between threads.
class DistributedSharedMutex {
 public:
  // The read-write lock `name` of `client`, which must outlive it. Throws
  // std::system_error (std::errc::invalid_argument) for a name C15 refuses,
  // function_not_supported where the backend offers no read-write locks.
  DistributedSharedMutex(LockClient& client, absl::string_view name,
                         MutexOptions options = {});
  DistributedSharedMutex(std::unique_ptr<ReadWriteLock> lock,
                         MutexOptions options = {});
  // The same as a Status.
  static absl::StatusOr<std::unique_ptr<DistributedSharedMutex>> Create(
      LockClient& client, absl::string_view name, MutexOptions options = {});

  DistributedSharedMutex(const DistributedSharedMutex&) = delete;
  DistributedSharedMutex& operator=(const DistributedSharedMutex&) = delete;

  void lock();
  bool try_lock();
  void unlock() noexcept;
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return TryLockFor(/*shared=*/false, internal::ToAbsl(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& when) {
    return TryLockFor(/*shared=*/false, internal::ToAbsl(when - Clock::now()));
  }

  void lock_shared();
  bool try_lock_shared();
  void unlock_shared() noexcept;
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return TryLockFor(/*shared=*/true, internal::ToAbsl(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(
      const std::chrono::time_point<Clock, Duration>& when) {
    return TryLockFor(/*shared=*/true, internal::ToAbsl(when - Clock::now()));
  }

  // The fencing token of this owner's innermost write hold, or read hold
  // (C8); FailedPrecondition when it has none (IsNotOwner) or lost it
  // (IsLost).
  absl::StatusOr<uint64_t> fencing_token() const;
  absl::StatusOr<uint64_t> shared_fencing_token() const;
  // The local view of those holds; kNotHeld when there is none.
  LockState state() const;
  LockState shared_state() const;

 private:
  // Takes a write (or, `shared`, a read) hold within `wait`: the hold, or
  // DeadlineExceeded when another owner kept it; throws for the rest.
  absl::StatusOr<Hold> Take(bool shared, absl::Duration wait,
                            const char* context);
  bool TryLockFor(bool shared, absl::Duration wait);
  void Unlock(internal::HoldStacks& holds, const char* what) noexcept;

  const std::unique_ptr<ReadWriteLock> lock_;
  const MutexOptions options_;
  internal::HoldStacks write_holds_;
  internal::HoldStacks read_holds_;
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_STD_SHARED_MUTEX_H_
