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
#include "dlock/hold.h"
#include "dlock/object_info.h"

namespace dlock {

// What the holder is told when a hold it believed it had is gone (C7, C20).
struct LockLostEvent {
  std::string name;
  std::string owner;  // owner id as stored on the backend
  uint64_t fencing_token = 0;
  absl::Status reason;  // IsLost(reason): force-unlocked, expired, unreachable
  // What was held (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's permits, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

using LockLostCallback = std::function<void(const LockLostEvent&)>;

struct AcquireOptions {
  // How long to wait for the lock. Zero: one attempt (what TryAcquire does).
  absl::Duration wait = absl::InfiniteDuration();
  // The lease. Unset: the client's default lease, renewed by the watchdog
  // until release (C7). Set: no renewal; the lock expires after it (C2).
  std::optional<absl::Duration> lease;
  // Explicit owner (a job or trace id) that several threads or processes
  // may share (C6). Empty: this client plus the calling thread.
  std::string owner_token;
  // Cancels the wait (Cancelled); a cancelled waiter leaves nothing behind.
  CancelToken cancel;
  // Called once, on the client's notifier thread, if this hold is lost.
  LockLostCallback on_lost;
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
  // Whether the liveness of the holder's client (its liveness record, or the
  // session its hold lives on) is current on the backend: false means a
  // waiter may take the lock over whatever its lease. Unset when free, or
  // where the backend cannot tell (memory://, a hold taken with liveness
  // off).
  std::optional<bool> holder_live;
  // Held by nobody: released with Hold::ReleaseAndKeepFor(), it expires by
  // itself after remaining_lease. locked is true and owner empty;
  // fencing_token is the released hold's where the backend keeps it.
  bool kept_after_release = false;
};

// The memory a server reports using for all its data, whoever's
// (LockAdmin::ServerMemoryUse()). Two readings around a change measure it.
struct ServerMemory {
  int64_t bytes = 0;
  // What was read, e.g. "INFO memory used_memory"; never a password.
  std::string source;
};

// One named lock, the handle service code uses. Safe to share between
// threads (C17). Acquiring hands back a Hold (dlock/hold.h), which releases,
// renews and answers for itself; administration (inspect, list, force
// unlock) is on LockClient::Admin(), and the calls that name a hold by its
// owner token on LockClient::OwnerTokens().
class DistributedLock {
 public:
  virtual ~DistributedLock() = default;

  virtual const std::string& name() const = 0;

  // Acquires or re-enters, waiting up to options.wait. Errors
  // (dlock/errors.h): DeadlineExceeded when the wait runs out
  // (IsWaitExpired) or a zero wait finds the lock held (IsHeldByAnother);
  // Cancelled when options.cancel fires; FailedPrecondition when the client
  // is closed (IsClientClosed); Unavailable when the backend cannot be
  // reached or the grant cannot be believed (C19): try again.
  virtual absl::StatusOr<Hold> Acquire(const AcquireOptions& options = {}) = 0;

  // One attempt, one round trip (C10): IsHeldByAnother when another owner
  // holds the lock.
  absl::StatusOr<Hold> TryAcquire(AcquireOptions options = {}) {
    options.wait = absl::ZeroDuration();
    return Acquire(options);
  }
};

}  // namespace dlock

#endif  // DLOCK_LOCK_H_
