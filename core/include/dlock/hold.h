// Copyright dlock authors. One acquisition of a lock, as a value: what
// Acquire() hands back. It knows its lock, its owner and its fencing token,
// so releasing it cannot name the wrong owner.
#ifndef DLOCK_HOLD_H_
#define DLOCK_HOLD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"

namespace dlock {

// What this client believes about a hold, without a round trip.
enum class LockState {
  kNotHeld,  // no hold: never acquired, or released
  kHeld,     // held; renewed by the watchdog or within its explicit lease
  kLost,     // was held, then lost (expired, forced, or unrenewable)
};

// Called when releasing fails where nobody can be returned a Status: a
// Hold's destructor, DistributedMutex::unlock(). Typical causes: the lock
// was lost before the release, or the backend was unreachable (the release
// is then retried in the background until the lease ends, C21).
using ReleaseErrorHook =
    std::function<void(absl::string_view lock_name, const absl::Status& error)>;

// The hook used where none was given (ClientOptions::on_release_error). The
// default one writes one line to stderr. An empty function restores it.
// Thread-safe.
void SetDefaultReleaseErrorHook(ReleaseErrorHook hook);

// Calls `hook`, or the default hook when `hook` is empty. Never throws: an
// exception from a hook is caught and written to stderr.
void ReportReleaseError(const ReleaseErrorHook& hook,
                        absl::string_view lock_name,
                        const absl::Status& error) noexcept;

namespace internal {
class HoldSite;  // the client's side of a hold; see core/src/hold.cc
struct AcquisitionShare;
struct HoldRef;
}  // namespace internal

// One acquisition. Move-only; a default-constructed or moved-from Hold is
// empty (active() is false). Each acquisition of a re-entrant lock is its
// own Hold: the lock is free once every Hold of the owner is released (C5).
//
// Thread safety: a Hold is a value. Its const methods may be called from
// any thread; Release(), Renew() and assignment need the caller to own it.
// It may be released on another thread than the one that acquired it.
class [[nodiscard]] Hold {
 public:
  Hold() = default;
  Hold(Hold&& other) noexcept;
  // Releases what this Hold had first (reporting a failure to the hook).
  Hold& operator=(Hold&& other) noexcept;
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  // Releases if still active. Never throws: a failure goes to the client's
  // release-error hook, except a loss (told once already, through the lost
  // callbacks and lost_token(), C20) and a client closed (which released
  // the hold, C13).
  ~Hold();

  // Takes this acquisition off the lock (C5); the lock is free when the
  // owner's last one goes. Once: afterwards the Hold is empty.
  // FailedPrecondition when the hold was lost before (IsLost), the Hold is
  // empty (IsNotOwner) or the client closed (IsClientClosed); Unavailable
  // when the backend did not confirm (the hold is given up all the same and
  // its release retried in the background, C21).
  absl::Status Release();

  // Ends this owner's hold like Release(), but instead of freeing the lock
  // leaves it taken on the backend, by nobody, until at least `keep_for`
  // from now on the backend's clock (ShedLock's lockAtLeastFor): "ran in
  // this slot". Nothing renews it, LockClient::Close() does not remove it
  // (not even this client's), and it expires on the backend by itself; until
  // then every owner's Acquire finds it held (IsHeldByAnother; a waiter is
  // woken when it expires, C9), Inspect() reports it with
  // LockInfo::kept_after_release, and ForceUnlock() removes it. The next
  // fresh hold gets a larger fencing token (C8). Once, as Release(): the
  // Hold is empty afterwards, except on InvalidArgument and on the two
  // refusals below, which change nothing.
  //  - Zero `keep_for`: exactly Release(). Negative, infinite, or positive
  //    but under 10ms: InvalidArgument.
  //  - A backend that cannot keep a lock after its release
  //    (BackendTraits::keeps_after_release false): Unimplemented, the lock
  //    and this Hold unchanged.
  //  - Other acquisitions of this owner through this client still stand
  //    (re-entry, C5, or KeepUntilLeaseEnd()): FailedPrecondition
  //    (ErrorKind::kAcquisitionsStanding), the lock and this Hold unchanged;
  //    release those first.
  //  - An owner token (C6) whose holds on the backend are not all this
  //    client's: the release takes this hold off and the lock stays the
  //    owner's; keep_for applies only to the release that takes the owner's
  //    last hold off.
  //  - Errors as Release(): IsLost when the hold was lost (nothing is kept:
  //    the lock is free or another owner's), IsNotOwner, IsClientClosed.
  //    Unavailable when the backend did not confirm: the hold is given up
  //    and the release retried in the background with what is left of
  //    keep_for (C21), so that a retry never frees the lock before keep_for
  //    from now nor keeps it longer than that; if no retry gets through
  //    before the hold's lease ends, the lock frees at the lease's end.
  absl::Status ReleaseAndKeepFor(absl::Duration keep_for);

  // Extends the lease to at least `lease` (default: the hold's lease, never
  // less than the kept maximum). FailedPrecondition when lost (IsLost).
  absl::Status Renew(std::optional<absl::Duration> lease = {});

  // Leaves the hold to run out with its explicit lease: no longer released
  // by this Hold (which becomes empty), the lock stays taken on the backend
  // until the lease ends there, or until the client closes (C13) or its
  // process dies (its liveness record, kept up for the hold meanwhile, then
  // lapses: ClientOptions::liveness_ttl). To outlive the client, use
  // ReleaseAndKeepFor(). For a
  // marker that keeps others out for a while after the work ("ran in this
  // slot"). FailedPrecondition for a watchdog-renewed hold, which would
  // never end (ErrorKind::kWatchdogRenewed: release it instead), and for a
  // lost one (IsLost).
  absl::Status KeepUntilLeaseEnd();

  bool active() const { return site_ != nullptr; }
  explicit operator bool() const { return active(); }

  // The lock's name; a permit's semaphore, an election, a read lock's lock.
  const std::string& lock_name() const { return name_; }
  // The owner id as stored on the backend (C6).
  const std::string& owner() const { return owner_; }
  // The fencing token of this hold (C8): pass it with every write to the
  // resource. The same for every re-entry of one hold.
  uint64_t fencing_token() const { return fencing_token_; }
  // The owner's hold count after this acquisition (1 on a fresh hold).
  int64_t hold_count() const { return hold_count_; }

  // The local view, a clock read and no round trip (C19): kHeld until the
  // hold's local deadline or a loss, kLost after, kNotHeld once released.
  LockState state() const;
  bool lost() const { return state() == LockState::kLost; }
  // Why it was lost (IsLost); OK while it is not.
  absl::Status lost_reason() const;
  // Fires once the hold is lost, on the client's notifier thread. Work can
  // poll it or attach a callback (ScopedCancelCallback) to stop touching
  // the resource.
  const CancelToken& lost_token() const { return lost_token_; }

  // Asks the backend whether this owner holds the lock (one round trip).
  absl::StatusOr<bool> IsHeldOnBackend() const;

 private:
  friend class internal::HoldSite;
  Hold(std::shared_ptr<internal::HoldSite> site, std::string name,
       std::string owner, uint64_t fencing_token, int64_t hold_count,
       uint64_t generation,
       std::shared_ptr<const internal::AcquisitionShare> acquisition);
  // How this Hold names its acquisition to its site.
  internal::HoldRef Ref() const;
  void ReleaseOrReport() noexcept;

  std::shared_ptr<internal::HoldSite> site_;
  std::string name_;
  // The client's key of a hold that is not a lock's writer (a reader, a
  // permit grant, a leadership); empty for a lock's writer, whose key is
  // its name.
  std::string key_;
  std::string owner_;
  uint64_t fencing_token_ = 0;
  int64_t hold_count_ = 0;
  uint64_t generation_ = 0;  // tells this hold from a later one of the owner
  // This acquisition among the hold's, shared with the client.
  std::shared_ptr<const internal::AcquisitionShare> acquisition_;
  CancelToken lost_token_;
};

}  // namespace dlock

#endif  // DLOCK_HOLD_H_
