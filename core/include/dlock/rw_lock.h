// Copyright dlock authors. A read-write lock: shared and exclusive holds of
// one lock name (C23). Design and per-backend algorithms:
// docs/design/primitives.md.
#ifndef DLOCK_RW_LOCK_H_
#define DLOCK_RW_LOCK_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/hold.h"
#include "dlock/lock.h"
#include "dlock/object_info.h"

namespace dlock {

// Readers and a writer of one lock name, from
// LockClient::GetReadWriteLock(name). Safe to share between threads (C17).
//
// - The writer is the lock: AcquireWrite() is GetLock(name)->Acquire(), and
//   a `dlock run NAME` is a writer of `dlock run --shared NAME`'s lock. Its
//   holds are ordinary Holds, with every property of a lock's (C1 to C21).
// - Readers hold together; a writer holds alone: no believed writer beside
//   any other believed holder, reader or writer (C19 applied to both).
// - A waiting writer is not starved by later readers: once it waits, new
//   readers wait behind it (they are refused until it has had its turn),
//   and it gets the lock when the readers already in are gone, by release,
//   lease end or lapsed liveness. Each backend's bound: docs/backends.md.
// - Re-entry: a reader re-enters its read (C5), even while a writer waits
//   (refusing it would deadlock the reader with itself). A writer may take
//   the read lock too, a separate Hold with the writer's token; releasing
//   the write hold then keeps the read (a downgrade). A reader asking for
//   the write lock is refused at once with FailedPrecondition
//   (ErrorKind::kUpgradeRefused): two readers upgrading would wait for each
//   other forever. Release the read and acquire the write instead, knowing
//   another writer may come in between.
// - Fencing: a writer's token is larger than every earlier writer's (and
//   every earlier reader's); a reader's is larger than every earlier
//   writer's. A writer's read hold has the writer's token.
// - Hold::ReleaseAndKeepFor() works on a write hold (no read hold of the
//   owner standing through this client), not on a read hold (Unimplemented).
class ReadWriteLock {
 public:
  virtual ~ReadWriteLock() = default;

  virtual const std::string& name() const = 0;

  // A shared hold, waiting up to options.wait. Errors as
  // DistributedLock::Acquire() (DeadlineExceeded while a writer holds, or
  // waits, or a lock kept after release stands; Cancelled;
  // IsClientClosed; Unavailable), and Unimplemented where the backend does
  // not offer read-write locks.
  virtual absl::StatusOr<Hold> AcquireRead(
      const AcquireOptions& options = {}) = 0;
  // The exclusive hold: DistributedLock::Acquire() of the same name, and
  // FailedPrecondition kUpgradeRefused when the owner holds the read lock
  // (in this client, known without a round trip, or through its owner
  // token elsewhere, C6).
  virtual absl::StatusOr<Hold> AcquireWrite(
      const AcquireOptions& options = {}) = 0;

  // One attempt each, one round trip (C10).
  absl::StatusOr<Hold> TryAcquireRead(AcquireOptions options = {}) {
    options.wait = absl::ZeroDuration();
    return AcquireRead(options);
  }
  absl::StatusOr<Hold> TryAcquireWrite(AcquireOptions options = {}) {
    options.wait = absl::ZeroDuration();
    return AcquireWrite(options);
  }

  // The lock as the backend sees it now, in one step (C11): its writer or
  // its readers, the waiting writer whose intent stops new readers, or a
  // lock kept after release.
  virtual absl::StatusOr<ObjectInfo> Inspect() = 0;

  // As DistributedLock's *ByToken, for read holds under an explicit owner
  // token (C6); the write side's are GetLock(name)'s.
  virtual absl::Status ReleaseReadByToken(absl::string_view owner_token) = 0;
  virtual absl::Status RenewReadByToken(
      absl::string_view owner_token,
      std::optional<absl::Duration> lease = {}) = 0;
  virtual LockState ReadStateByToken(absl::string_view owner_token) const = 0;
};

}  // namespace dlock

#endif  // DLOCK_RW_LOCK_H_
