// Copyright dlock authors. One named distributed lock as one client sees it.
#ifndef DLOCK_LOCK_H_
#define DLOCK_LOCK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"

namespace dlock {

// What the holder is told when a hold it believed it had is gone (C7).
struct LockLostEvent {
  std::string name;
  std::string owner;  // owner id as stored on the backend
  uint64_t fencing_token = 0;
  absl::Status reason;  // why: force-unlocked, expired, backend unreachable
};

using LockLostCallback = std::function<void(const LockLostEvent&)>;

struct AcquireOptions {
  // How long to wait for the lock. Zero: one attempt (what TryAcquire does).
  absl::Duration wait = absl::InfiniteDuration();
  // The lease. Unset: the client's default lease, renewed by the watchdog
  // until release (C7). Set: no renewal; the lock expires after it (C2).
  std::optional<absl::Duration> lease;
  // Explicit owner (a job or trace id). Empty: this client plus this thread.
  std::string owner_token;
  // Cancels the wait (Cancelled); a cancelled waiter leaves nothing behind.
  CancelToken cancel;
  // Called, on the watchdog's thread, if this hold is lost.
  LockLostCallback on_lost;
};

// The result of a successful acquisition.
struct Acquired {
  uint64_t fencing_token = 0;  // same on re-entry, larger on each fresh hold
  int64_t hold_count = 0;      // 1 on a fresh hold
};

// A lock as seen on the backend (C11). Times are on the backend's clock.
struct LockInfo {
  std::string name;
  bool locked = false;
  std::string owner;  // owner id of the holder, empty when free
  int64_t hold_count = 0;
  uint64_t fencing_token = 0;
  absl::Duration remaining_lease = absl::ZeroDuration();
  absl::Time since = absl::InfinitePast();  // when the current hold began
};

// What this client believes about one owner's hold, without a round trip.
enum class LockState {
  kNotHeld,  // this client has no record of a hold by the owner
  kHeld,     // held; renewed by the watchdog or within its explicit lease
  kLost,     // was held, then lost (expired, forced, or unrenewable)
};

// One named lock. Handles are safe to share between threads (C17); each call
// acts for the owner named by `owner_token`, or, when empty, for the calling
// thread of this client (C6).
class DistributedLock {
 public:
  virtual ~DistributedLock() = default;

  virtual const std::string& name() const = 0;

  // Acquires or re-enters, waiting up to options.wait. DeadlineExceeded when
  // the wait runs out, Cancelled when options.cancel fires.
  virtual absl::StatusOr<Acquired> Acquire(
      const AcquireOptions& options = {}) = 0;

  // One attempt, one round trip (C10). DeadlineExceeded when another owner
  // holds the lock.
  absl::StatusOr<Acquired> TryAcquire(AcquireOptions options = {}) {
    options.wait = absl::ZeroDuration();
    return Acquire(options);
  }

  // Takes one hold off; the lock is freed at zero (C5). FailedPrecondition if
  // the owner does not hold it, or held it and lost it (C4, C12).
  virtual absl::Status Release(absl::string_view owner_token = {}) = 0;

  // Extends the lease to at least `lease` (default: the lease of the hold,
  // never less than the kept maximum). FailedPrecondition if not the owner.
  virtual absl::Status Renew(std::optional<absl::Duration> lease = {},
                             absl::string_view owner_token = {}) = 0;

  // The lock as the backend sees it now (C11).
  virtual absl::StatusOr<LockInfo> Inspect() = 0;

  // Whether `owner_token` (or this thread) holds the lock, asked of the
  // backend.
  virtual absl::StatusOr<bool> IsHeldByMe(
      absl::string_view owner_token = {}) = 0;

  // Removes the lock whoever holds it (C12); waiters wake.
  virtual absl::Status ForceUnlock() = 0;

  // This client's local view of the owner's hold (no round trip), and the
  // fencing token of that hold (FailedPrecondition when not held).
  virtual LockState State(absl::string_view owner_token = {}) const = 0;
  virtual absl::StatusOr<uint64_t> FencingToken(
      absl::string_view owner_token = {}) const = 0;

  absl::StatusOr<bool> IsLocked() {
    absl::StatusOr<LockInfo> info = Inspect();
    if (!info.ok()) return info.status();
    return info->locked;
  }
};

}  // namespace dlock

#endif  // DLOCK_LOCK_H_
