// Copyright dlock authors. A semaphore with leases: N permits under one
// name, each grant a hold like a lock's (C22). Design and per-backend
// algorithms: docs/design/primitives.md.
#ifndef DLOCK_SEMAPHORE_H_
#define DLOCK_SEMAPHORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"
#include "dlock/hold.h"
#include "dlock/lock.h"
#include "dlock/object_info.h"

namespace dlock {

// The largest N a semaphore may have: every acquire and release reads the
// holders on the server, so its cost grows with them.
inline constexpr int64_t kMaxSemaphorePermits = 10000;

// One grant of a semaphore's permits: the Hold (a lock's hold in all but
// name: lease or watchdog, local deadline, loss told once, owner-checked
// release and renewal, C19 to C21) and the permit slots it holds. Move-only;
// an empty Permit is !active(). Thread safety: as Hold.
class [[nodiscard]] Permit {
 public:
  Permit() = default;
  // For the client (and tests): a grant of `slots` under `hold`.
  Permit(Hold hold, std::vector<int64_t> slots)
      : hold_(std::move(hold)), slots_(std::move(slots)) {}
  Permit(Permit&&) noexcept = default;
  // Releases what this Permit had first, as Hold does.
  Permit& operator=(Permit&&) noexcept = default;

  bool active() const { return hold_.active(); }
  explicit operator bool() const { return active(); }

  // How many permits this grant holds (the `permits` asked).
  int64_t permits() const { return static_cast<int64_t>(slots_.size()); }
  // The permit slots it holds, ascending, each in [0, N): while this grant
  // is believed held no other believed holder has one of them, so a
  // resource guarded per slot sees one holder at a time (C22). A slot
  // given up (released, lost) goes to a later grant, whose fencing token is
  // larger.
  const std::vector<int64_t>& slots() const { return slots_; }
  // Larger than every token granted before for this semaphore (C8 per
  // grant); the same on re-entry.
  uint64_t fencing_token() const { return hold_.fencing_token(); }

  // The Hold's view and calls (dlock/hold.h): state() is kHeld only while
  // the hold's local deadline lies ahead (C19); a loss is told once, through
  // AcquireOptions::on_lost and lost_token() (C20).
  LockState state() const { return hold_.state(); }
  bool lost() const { return hold_.lost(); }
  absl::Status lost_reason() const { return hold_.lost_reason(); }
  const CancelToken& lost_token() const { return hold_.lost_token(); }
  // Gives the permits back (this acquisition; the grant ends with the
  // owner's last one, C5). Errors as Hold::Release(); a release the backend
  // did not confirm is retried in the background (C21).
  absl::Status Release() { return hold_.Release(); }
  absl::Status Renew(std::optional<absl::Duration> lease = {}) {
    return hold_.Renew(lease);
  }
  // Hold::ReleaseAndKeepFor() is a lock's: on a Permit's hold it answers
  // Unimplemented and changes nothing. KeepUntilLeaseEnd() works.
  Hold& hold() { return hold_; }
  const Hold& hold() const { return hold_; }

 private:
  Hold hold_;
  std::vector<int64_t> slots_;
};

// N permits under one name (C22), from LockClient::GetSemaphore(name, N).
// Safe to share between threads (C17).
//
// - At most N permits are believed held at any instant, whoever holds them
//   and whatever the network does (C19 applied to the count); the permits
//   of a holder that dies or is cut off come back within its lease, or its
//   liveness TTL where that is shorter (C2, ClientOptions::liveness_ttl).
// - N is the semaphore's, not the handle's: while any permit is held or a
//   waiter keeps its place, a caller asking with another N is refused with
//   FailedPrecondition (ErrorKind::kLimitMismatch, naming the N in force),
//   never given a second semaphore in silence. Once nothing is held, the
//   next caller's N is in force.
// - Owners are those of a lock (C6): one owner holds at most one grant of
//   a semaphore; acquiring again is a re-entry (C5) of that grant, with the
//   same permits, slots and token. To hold permits independently from one
//   thread, use distinct owner tokens. So a retried acquire whose reply was
//   lost re-enters instead of taking a second grant (C21).
// - Waiting (C9): a release wakes waiters; the first waiter keeps a place
//   for its permits, so a waiter for many permits is not starved by later
//   callers asking fewer (each backend's order: docs/backends.md).
// - Backends whose traits do not offer semaphores (a Redlock group: a count
//   over independent masters can exceed N) answer every call Unimplemented
//   with the reason.
class Semaphore {
 public:
  virtual ~Semaphore() = default;

  virtual const std::string& name() const = 0;
  // N, as asked of GetSemaphore().
  virtual int64_t limit() const = 0;

  // Takes `permits` permits at once (all or none, one atomic step on every
  // backend that offers semaphores), or re-enters this owner's grant,
  // waiting up to options.wait. Errors (dlock/errors.h):
  //  - InvalidArgument: permits outside [1, limit()], or a bad option.
  //  - FailedPrecondition kLimitMismatch: another N is in force.
  //  - FailedPrecondition kPermitsMismatch: a re-entry asking other permits
  //    than the owner's grant holds.
  //  - DeadlineExceeded (IsHeldByAnother for a try, IsWaitExpired after a
  //    wait), Cancelled, FailedPrecondition IsClientClosed, Unavailable: as
  //    DistributedLock::Acquire(); a waiter that gives up leaves nothing
  //    behind, its kept place included (C9).
  //  - Unimplemented: the backend does not offer semaphores (the reason).
  virtual absl::StatusOr<Permit> Acquire(int64_t permits,
                                         const AcquireOptions& options) = 0;
  absl::StatusOr<Permit> Acquire(const AcquireOptions& options = {}) {
    return Acquire(1, options);
  }
  // One attempt, one round trip (C10).
  absl::StatusOr<Permit> TryAcquire(int64_t permits = 1,
                                    AcquireOptions options = {}) {
    options.wait = absl::ZeroDuration();
    return Acquire(permits, options);
  }

  // The semaphore as the backend sees it now, in one step (C11): the N in
  // force, every holder with its permits and slots, the head waiter.
  virtual absl::StatusOr<ObjectInfo> Inspect() = 0;

  // As DistributedLock's, for a grant held under an explicit owner token
  // (C6), possibly taken by another process.
  virtual absl::Status ReleaseByToken(absl::string_view owner_token) = 0;
  virtual absl::Status RenewByToken(
      absl::string_view owner_token,
      std::optional<absl::Duration> lease = {}) = 0;
  virtual LockState StateByToken(absl::string_view owner_token) const = 0;
};

}  // namespace dlock

#endif  // DLOCK_SEMAPHORE_H_
