// Copyright dlock authors. The client core's table of holds: what this
// client believes it holds, each hold's local deadline (C19), which holds a
// loss ends and the notices that tell it (C20), and what a release or a
// renewal changes. Data and the clock only: no thread and no backend call;
// what the backend says comes in as arguments, and the backend's own bound
// on a hold (Backend::HeldUntil) through the function it is given. Every
// method runs under the client core's mutex.
//
// The deadline side (losses, notices, holder liveness) is in
// hold_deadlines.cc; final releases not confirmed yet in hold_unconfirmed.cc.
#ifndef DLOCK_CORE_SRC_HOLD_TABLE_H_
#define DLOCK_CORE_SRC_HOLD_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "alarms.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/hold_key.h"
#include "dlock/clock.h"
#include "dlock/lock.h"
#include "dlock/observer.h"
#include "hold_site.h"
#include "pending_releases.h"

namespace dlock::internal {

// One acquisition of a hold, and what it asked to be told of a loss.
struct Acquisition {
  std::shared_ptr<AcquisitionShare> share;  // with its Hold
  MonoTime granted;                         // for the observer's hold time
  LockLostCallback on_lost;                 // may be empty
};

struct HoldEntry {
  uint64_t generation = 0;  // tells a call's hold from a later one
  OwnerKind owner_kind = OwnerKind::kThread;
  uint64_t fencing_token = 0;
  MonoTime granted;         // when this client recorded the hold's first grant
  int64_t local_holds = 0;  // taken through this client, not yet released
  // Explicit owner tokens only: holds the backend counts that the final
  // release must take off besides the caller's (inner releases that could
  // not reach it). A thread owner's final release takes off all.
  int64_t unsynced = 0;
  absl::Duration lease;  // of the renewals (and of the first grant)
  // The longest lease ever asked of the backend for this hold: it keeps
  // that maximum (C5), so the hold can outlive the client by as much.
  absl::Duration max_lease;
  bool renewed = false;                // by the watchdog
  std::shared_ptr<HoldRecord> record;  // the backend's (backend.h)
  // Believed held until here: the send time of the last grant or renewal
  // the backend confirmed, plus the lease, less the drift margin (C19).
  MonoTime valid_until;
  MonoTime next_renewal;
  absl::Status renewal_error;  // the last transient renewal failure
  bool lost = false;           // no longer believed; told, or being told
  absl::Status lost_reason;
  // One per acquisition, innermost last; a release takes its own off.
  std::vector<Acquisition> acquisitions;
  // Acquisitions left to run out with the lease (Hold::KeepUntilLeaseEnd),
  // counted in local_holds; nobody believes them.
  int64_t kept = 0;
  // A semaphore's grant (issue 24): its permits, and the slots the backend
  // granted (C22).
  int64_t permits = 0;
  std::vector<int64_t> slots;
};

// A loss to tell once no lock is held (C20).
struct LossNotice {
  LockLostEvent event;
  std::vector<LockLostCallback> callbacks;
  std::vector<CancelToken> tokens;
  // For the observer, told when the hold had acquisitions to tell.
  LossCause cause = LossCause::kGone;
  MonoTime granted;
  // False when the observer was told of the hold's end already: a release
  // it heard of (OnRelease) that was never confirmed.
  bool observe = true;
};

// Whether what a lost hold may have left on the backend must be let go
// (the deadline passed, a grant came too late) or is gone already (the
// backend said so, or a new grant replaces it).
enum class Leftover { kGone, kRelease };

// What the observer is told of one release (ReleaseEvent).
struct ReleaseReport {
  bool tell = false;  // an acquisition this client granted ended
  uint64_t fencing_token = 0;
  MonoTime granted;
  bool last = false;
  // The backend's answer; a transient failure of the last release is
  // retried in the background.
  absl::Status result;
  bool given_up = false;  // the last release, unconfirmed
};

// What a release sends the backend, decided under the lock (PlanRelease).
struct ReleasePlan {
  bool final_release = false;  // the owner's last hold here: given up now
  uint64_t generation = 0;     // 0: no hold of ours (taken elsewhere, C6)
  HoldsToRelease holds{.count = 1};
  std::shared_ptr<HoldRecord> record;
  // A final release: the longest lease the hold asked (for the retries),
  // and when the hold is told lost unless the backend confirms first (C20).
  absl::Duration max_lease;
  MonoTime notice_at;
};

// One watchdog renewal, collected under the lock and applied after.
struct DueRenewal {
  HoldKey key;
  uint64_t generation;
  uint64_t fencing_token;
  absl::Duration lease;
  std::shared_ptr<HoldRecord> record;
};

class HoldTable {
 public:
  // Backend::HeldUntil of the backend the client uses.
  using BackendBound =
      std::function<MonoTime(const HoldKeyView& key, const HoldRecord*)>;

  HoldTable(const Clock& clock, BackendBound bound, PendingReleases& pending,
            Alarms& alarms)
      : clock_(clock),
        bound_(std::move(bound)),
        pending_(pending),
        alarms_(alarms) {}
  HoldTable(const HoldTable&) = delete;
  HoldTable& operator=(const HoldTable&) = delete;

  // --- Grants and lookups (hold_table.cc) ---------------------------------

  // The record of the owner's believed hold, for a re-entry; null if none.
  std::shared_ptr<HoldRecord> BelievedRecord(const HoldKeyView& key);
  // A semaphore's re-entry (C5) asking `permits`: PermitsMismatch when the
  // owner's believed grant here holds another number (C22).
  absl::Status CheckPermits(const HoldKeyView& key, int64_t permits);
  // The believed hold of `key` (its deadline ahead, not lost), if any.
  const HoldEntry* BelievedEntry(const HoldKeyView& key);
  // A call about the hold of `key` with `fencing_token` (a proclaim) found
  // it gone (`result`): the hold is lost, told through `notices`.
  void FoundGone(const HoldKeyView& key, uint64_t fencing_token,
                 const absl::Status& result, std::vector<LossNotice>& notices);
  // Records the grant of `call`: a re-entry of the believed hold, or a
  // fresh hold that replaces whatever the owner had here. `acquisition`
  // gets what the new acquisition shares with its Hold, `fresh` whether no
  // acquisition of the hold was live.
  HoldEntry& RecordGrant(const HoldKey& key, const AcquireCall& call,
                         const Grant& grant, const AcquireOptions& options,
                         std::shared_ptr<AcquisitionShare>& acquisition,
                         bool& fresh);
  // The hold's fencing token while the Hold's acquisition is believed held;
  // NotOwner when it was released by owner token, IsLost when it was lost
  // or its hold is not the owner's any more.
  absl::StatusOr<uint64_t> Believed(const HoldRef& ref);
  // The same for the owner's hold, whichever acquisitions stand (by owner
  // token, C6); NotOwner when the owner has no hold here.
  absl::StatusOr<uint64_t> BelievedByOwner(const HoldKeyView& key);

  // --- Releases, keeps and renewals (hold_table.cc) -----------------------

  // Decides what the release of a Hold's acquisition sends, taking it off
  // the table; not OK when it is refused without a backend call. A final
  // release gives the hold up at once (renewal stops, C21) and registers it
  // with PendingReleases::BeginFinalRelease().
  absl::StatusOr<ReleasePlan> PlanRelease(const HoldRef& ref,
                                          absl::Duration keep_for,
                                          ReleaseReport& report);
  // The same for one hold of the owner by owner token (C6): the innermost
  // acquisition here, whose Hold learns it was released; with no hold here,
  // a plan for a hold taken elsewhere (generation 0, no record).
  absl::StatusOr<ReleasePlan> PlanReleaseByOwner(const HoldKeyView& key,
                                                 ReleaseReport& report);
  // --- Final releases not confirmed yet (hold_unconfirmed.cc) -------------

  // The backend answered `result`, to the final release of `plan` sent at
  // `sent`: a gone hold is lost (told through `notices`); a transient
  // failure leaves the release to retry in the background (or to Close()'s
  // last pass), keeping the lock until `keep_for` from `sent`, and
  // the hold to be told lost at its notice time unless a retry is confirmed
  // first (C20, C21). Once the hold was told, the caller gets that its lease
  // ended first. Returns what the caller gets.
  absl::Status FinishFinalRelease(const HoldKey& key, const ReleasePlan& plan,
                                  const absl::Status& result,
                                  absl::Duration keep_for, MonoTime sent,
                                  std::vector<LossNotice>& notices,
                                  ReleaseReport& report);
  // Whether the final release of `plan` still awaits its confirmation,
  // untold (neither its notice time nor Close() came). Each is known by
  // its hold's generation: threads sharing an owner token (C6) can have a
  // later hold of the same key given up while an earlier one's release is
  // still on its way.
  bool AwaitsConfirmation(const ReleasePlan& plan) const;
  // Its notice time came on the caller's thread first: told on `out` now.
  void TellUnconfirmedNow(const ReleasePlan& plan,
                          std::vector<LossNotice>& out);
  // A background retry confirmed the releases of these holds in time: no
  // notice.
  void ReleaseConfirmed(const std::vector<uint64_t>& generations);
  // What a final release answered at its notice time gets (C20).
  static absl::Status LeaseEndedFirst(absl::string_view name);
  // The backend answered `result` to an inner release of `plan`: a gone
  // hold is lost (told through `notices`), a transient failure leaves a
  // hold for the final release to take off. Returns what the caller gets.
  absl::Status FinishInnerRelease(const HoldKey& key, const ReleasePlan& plan,
                                  const absl::Status& result,
                                  std::vector<LossNotice>& notices);
  // The loss a release reports for a hold lost before it (`why`).
  static absl::Status LostBeforeRelease(absl::string_view name,
                                        const absl::Status& why);
  // Hold::KeepUntilLeaseEnd(): the acquisition is left to run out.
  absl::Status Keep(const HoldRef& ref, ReleaseReport& report);
  // A renewal by a caller: what to send (lease, record) for the hold of
  // `generation`, or by owner token for the owner's hold here, or for a
  // hold taken elsewhere (generation 0, `default_lease`, no record).
  struct RenewPlan {
    absl::Duration lease;
    uint64_t generation = 0;
    uint64_t fencing_token = 0;
    std::shared_ptr<HoldRecord> record;
  };
  absl::StatusOr<RenewPlan> PlanRenewal(const HoldKey& key,
                                        uint64_t generation);
  absl::StatusOr<RenewPlan> PlanRenewalByOwner(const HoldKey& key,
                                               absl::Duration default_lease);
  // The backend answered `result` to a renewal of `lease` sent at `sent`.
  void FinishRenewal(const HoldKey& key, uint64_t generation,
                     absl::Duration lease, MonoTime sent,
                     const absl::Status& result,
                     std::vector<LossNotice>& notices);
  // The watchdog's renewals due at `now`, with those due a little later:
  // holds taken moments apart then share one batch.
  std::vector<DueRenewal> DueRenewals(MonoTime now);
  void FinishRenewals(const std::vector<DueRenewal>& due,
                      const std::vector<absl::Status>& results, MonoTime sent);
  // When the watchdog next has a renewal due; InfiniteFuture for none.
  MonoTime NextRenewal() const;

  // --- Losses, deadlines and liveness (hold_deadlines.cc) -----------------

  // Marks a hold lost and queues its notice on `out`; deliver it once no
  // lock is held. A hold is marked lost once (C20).
  void MarkLost(const HoldKey& key, HoldEntry& hold, absl::Status reason,
                LossCause cause, Leftover leftover,
                std::vector<LossNotice>& out);
  // The same, queued for the notifier's thread.
  void MarkLostQueued(const HoldKey& key, HoldEntry& hold, absl::Status reason,
                      LossCause cause, Leftover leftover);
  // A backend event (BackendListener::OnHoldLost).
  void MarkLostByBackend(const HoldKeyView& key, const absl::Status& reason);
  // Marks the hold lost if its deadline (less the notice lead) has passed:
  // once past, never believed again (C19, C20). Returns whether it is lost.
  bool LatchDeadline(const HoldKey& key, HoldEntry& hold, MonoTime now);
  // Marks holds whose notice time has come lost; returns the next one.
  MonoTime ExpireOverdue(MonoTime now);
  // How late the notifier has woken lately (WakeLateness::Recent()): each
  // hold's notice time comes that much sooner, within NoticeLead's bound.
  // Set by the notifier before it looks, so that the notice times it plans
  // with are the ones every check uses until it looks again.
  void SetWakeLateness(absl::Duration lateness) { wake_lateness_ = lateness; }
  // The oldest notice queued for the notifier, if any.
  std::optional<LossNotice> TakeQueuedNotice();
  // Close(): every believed hold ends (told as kClientClosed, with
  // `reason`), and so does every hold whose final release is unconfirmed
  // (with `unconfirmed`); returns what to release for them, and the notices
  // to deliver before.
  std::vector<PendingReleases::Claim> CloseAll(const absl::Status& reason,
                                               const absl::Status& unconfirmed,
                                               std::vector<LossNotice>& out);

  // Holder liveness (docs/reliability.md): the core keeps a liveness record
  // on the backend with this TTL (InfiniteDuration: none).
  void KeepLiveness(absl::Duration ttl);
  bool keeps_liveness() const {
    return liveness_ttl_ != absl::InfiniteDuration();
  }
  absl::Duration liveness_ttl() const { return liveness_ttl_; }
  // Whether a heartbeat is wanted at `now`: due, and some hold needs it.
  bool HeartbeatDue(MonoTime now) const;
  MonoTime next_heartbeat() const { return next_heartbeat_; }
  // A refresh of the record sent at `sent` was confirmed (a heartbeat or a
  // grant, which refreshes it in the same step).
  void LivenessConfirmed(MonoTime sent);
  // The heartbeat sent at `sent` was confirmed, or failed.
  void HeartbeatConfirmed(MonoTime sent);
  void HeartbeatFailed(const absl::Status& error);
  // Whether some hold needs the record kept up.
  bool LivenessWanted() const;

 private:
  static bool HasAcquisition(const HoldEntry& hold,
                             const AcquisitionShare* share);
  // The acquisition `share` names in `hold`, or its acquisitions' end().
  static std::vector<Acquisition>::iterator FindAcquisition(
      HoldEntry& hold, const AcquisitionShare* share);
  // What a Hold whose acquisition a release by owner token took is told.
  static absl::Status ReleasedByToken(absl::string_view name);
  // PlanRelease's part once the owner's hold here is found.
  absl::StatusOr<ReleasePlan> PlanReleaseOf(HoldMap<HoldEntry>::iterator it,
                                            const HoldRef& ref,
                                            absl::Duration keep_for,
                                            ReleaseReport& report);
  // The entry's plan for a renewal.
  absl::StatusOr<RenewPlan> PlanRenewalOf(const HoldKey& key, HoldEntry& hold);
  // How many holds a release of the whole hold takes off the backend.
  static HoldsToRelease AllHoldsOf(const HoldEntry& hold);
  MonoTime LocalDeadline(MonoTime sent, absl::Duration lease) const;
  // The earlier of the hold's lease deadline and the backend's bound.
  MonoTime DeadlineOf(const HoldKeyView& key, const HoldEntry& hold) const;
  // When the hold stops being believed and is told lost: its deadline less
  // the notice lead (C19, C20).
  MonoTime NoticeAt(const HoldKeyView& key, const HoldEntry& hold) const;
  // The notice lead of a hold of `lease` (the longest for InfiniteDuration).
  absl::Duration NoticeLeadFor(absl::Duration lease) const;
  // Why a deadline ended a hold, in words and as the observer's class.
  struct DeadlineLoss {
    absl::Status reason;
    LossCause cause;
  };
  DeadlineLoss DeadlineReason(const HoldKey& key, const HoldEntry& hold) const;
  // Asks the threads for attention if the hold needs it sooner than they
  // planned.
  void WakeFor(const HoldKey& key, const HoldEntry& hold);
  // RecordGrant's new hold, replacing what the owner had here.
  void StartAfresh(const HoldKey& key, HoldEntry& hold, const AcquireCall& call,
                   const Grant& grant, bool renewed, MonoTime now);
  // PlanRelease's two cases.
  void TakeInner(HoldEntry& hold, const HoldRef& ref, ReleaseReport& report);
  void GiveUp(HoldMap<HoldEntry>::iterator it, const HoldRef& ref,
              ReleasePlan& plan, ReleaseReport& report);

  // A hold given up by a final release the backend has not confirmed (C20).
  struct UnconfirmedRelease {
    HoldKey key;
    HoldEntry hold;  // as given up, with what its acquisitions asked
    MonoTime notice_at;
    bool release_observed = false;  // the observer had its OnRelease
  };
  // Keeps the hold `it` given up until its release is confirmed or its
  // notice time comes (hold_unconfirmed.cc); erases it from holds_.
  void AwaitConfirmation(HoldMap<HoldEntry>::iterator it, ReleasePlan& plan);
  // Tells the unconfirmed release `it` lost now, on `out` (or queued for
  // the notifier when `out` is null).
  using UnconfirmedMap = absl::flat_hash_map<uint64_t, UnconfirmedRelease>;
  void TellUnconfirmed(UnconfirmedMap::iterator it, absl::Status reason,
                       LossCause cause, std::vector<LossNotice>* out);
  // The notifier's part: tells those whose notice time has come; returns
  // the next notice time.
  MonoTime TellUnconfirmedDue(MonoTime now);

  const Clock& clock_;
  const BackendBound bound_;
  PendingReleases& pending_;
  Alarms& alarms_;
  uint64_t next_generation_ = 1;
  HoldMap<HoldEntry> holds_;
  UnconfirmedMap unconfirmed_;  // by the hold's generation
  // Notices for the notifier's thread, oldest first.
  std::deque<LossNotice> queued_;
  // The liveness record's TTL: InfiniteDuration when the backend keeps none
  // or the client turned it off.
  absl::Duration liveness_ttl_ = absl::InfiniteDuration();
  // Every hold is believed at most until here: the send time of the last
  // confirmed liveness refresh (a heartbeat or a grant) plus the TTL, less
  // the drift margin (C19). InfiniteFuture without liveness.
  MonoTime liveness_until_ = MonoTime::InfiniteFuture();
  MonoTime next_heartbeat_ = MonoTime::InfinitePast();
  absl::Status heartbeat_error_;  // the last failure
  absl::Duration wake_lateness_ = absl::ZeroDuration();
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_HOLD_TABLE_H_
