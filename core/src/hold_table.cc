// The hold table's grants, lookups, releases and renewals; the deadline side
// is in hold_deadlines.cc.
#include "hold_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

std::shared_ptr<HoldRecord> HoldTable::BelievedRecord(const HoldKeyView& key) {
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.lost) return nullptr;
  return it->second.record;
}

absl::Status HoldTable::CheckPermits(const HoldKeyView& key, int64_t permits) {
  const HoldEntry* hold = BelievedEntry(key);
  if (hold == nullptr || hold->permits == permits) return absl::OkStatus();
  return PermitsMismatchError(ObjectNameOf(key.first), hold->permits, permits);
}

const HoldEntry* HoldTable::BelievedEntry(const HoldKeyView& key) {
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.local_holds == 0 ||
      LatchDeadline(it->first, it->second, clock_.Now())) {
    return nullptr;
  }
  return &it->second;
}

void HoldTable::FoundGone(const HoldKeyView& key, uint64_t fencing_token,
                          const absl::Status& result,
                          std::vector<LossNotice>& notices) {
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.fencing_token != fencing_token ||
      it->second.lost) {
    return;
  }
  MarkLost(it->first, it->second, result, LossCause::kGone, Leftover::kGone,
           notices);
}

HoldEntry& HoldTable::RecordGrant(
    const HoldKey& key, const AcquireCall& call, const Grant& grant,
    const AcquireOptions& options,
    std::shared_ptr<AcquisitionShare>& acquisition, bool& fresh) {
  const absl::Duration lease = call.lease;
  HoldEntry& hold = holds_[key];
  const MonoTime now = clock_.Now();
  const bool same_hold = hold.local_holds > 0 && !hold.lost &&
                         hold.fencing_token == grant.fencing_token;
  if (same_hold && now < NoticeAt(key, hold)) {
    // Re-entry never shortens the lease (C5); the backend kept the maximum.
    hold.lease = std::max(hold.lease, lease);
    hold.max_lease = std::max(hold.max_lease, lease);
    hold.valid_until =
        std::max(hold.valid_until, LocalDeadline(grant.sent, lease));
    if (grant.record != nullptr) hold.record = grant.record;
    if (!grant.slots.empty()) hold.slots = grant.slots;
    if (!options.lease.has_value() && !hold.renewed) {
      hold.renewed = true;
      hold.next_renewal = grant.sent + hold.lease / 3;
    }
  } else {
    StartAfresh(key, hold, call, grant, !options.lease.has_value(), now);
  }
  acquisition = std::make_shared<AcquisitionShare>();
  // Fresh to the observer: no acquisition of it was live (the others, if
  // any, were left to run out and told as released).
  fresh = hold.acquisitions.empty();
  hold.acquisitions.push_back(Acquisition{
      .share = acquisition, .granted = now, .on_lost = options.on_lost});
  ++hold.local_holds;
  WakeFor(key, hold);
  return hold;
}

void HoldTable::StartAfresh(const HoldKey& key, HoldEntry& hold,
                            const AcquireCall& call, const Grant& grant,
                            bool renewed, MonoTime now) {
  const absl::Duration lease = call.lease;
  const bool continues =
      hold.local_holds > 0 && hold.fencing_token == grant.fencing_token;
  if (hold.local_holds > 0 && !hold.lost) {
    // Still believed, yet not re-entered: its deadline passed, or the
    // backend granted a new hold because the old one was gone (forced away,
    // expired). Its acquisitions are told (C20). The new grant replaces what
    // the backend had of it.
    DeadlineLoss loss =
        continues
            ? DeadlineReason(key, hold)
            : DeadlineLoss{absl::FailedPreconditionError(absl::StrCat(
                               "the backend granted a new hold (token ",
                               grant.fencing_token, "), so this one was gone")),
                           LossCause::kGone};
    MarkLostQueued(key, hold, std::move(loss.reason), loss.cause,
                   Leftover::kGone);
  }
  // An owner token's holds the backend still counts for the hold the new
  // grant continues.
  const int64_t kept =
      continues && call.owner_kind == OwnerKind::kToken
          ? std::min(hold.local_holds + hold.unsynced, grant.hold_count - 1)
          : 0;
  const absl::Duration kept_lease = continues ? hold.max_lease : lease;
  hold = HoldEntry{};
  hold.generation = next_generation_++;
  hold.owner_kind = call.owner_kind;
  hold.fencing_token = grant.fencing_token;
  hold.granted = now;
  hold.unsynced = std::max<int64_t>(0, kept);
  hold.lease = lease;
  hold.max_lease = std::max(lease, kept_lease);
  hold.renewed = renewed;
  hold.record = grant.record;
  hold.valid_until = LocalDeadline(grant.sent, lease);
  hold.next_renewal = grant.sent + lease / 3;
  if (call.shape.mode == HoldMode::kPermits) {
    hold.permits = call.shape.permits;
    hold.slots = grant.slots;
  }
}

absl::StatusOr<uint64_t> HoldTable::Believed(const HoldRef& ref) {
  auto it = holds_.find(HoldKeyView(ref.name, ref.owner));
  if (it == holds_.end() || it->second.generation != ref.generation) {
    if (it == holds_.end() && ref.acquisition->released_by_token) {
      return NotOwnerError(ref.name);
    }
    // This Hold's hold is over, and was not released through it.
    return LostError(ref.name,
                     "the hold ended, and a later one of the same owner is "
                     "not this one");
  }
  // A local clock read, never a round trip (C19); once past, for good.
  if (LatchDeadline(it->first, it->second, clock_.Now())) {
    return LostError(ref.name, it->second.lost_reason.message());
  }
  if (!HasAcquisition(it->second, ref.acquisition)) {
    return NotOwnerError(ref.name);  // released by owner token
  }
  return it->second.fencing_token;
}

absl::StatusOr<uint64_t> HoldTable::BelievedByOwner(const HoldKeyView& key) {
  auto it = holds_.find(key);
  if (it == holds_.end()) return NotOwnerError(key.first);
  if (LatchDeadline(it->first, it->second, clock_.Now())) {
    return LostError(key.first, it->second.lost_reason.message());
  }
  return it->second.fencing_token;
}

absl::Status HoldTable::LostBeforeRelease(absl::string_view name,
                                          const absl::Status& why) {
  return LostError(name, absl::StrCat(why.message(), " (before release)"));
}

absl::StatusOr<ReleasePlan> HoldTable::PlanRelease(const HoldRef& ref,
                                                   absl::Duration keep_for,
                                                   ReleaseReport& report) {
  auto it = holds_.find(HoldKeyView(ref.name, ref.owner));
  if (it == holds_.end() || it->second.generation != ref.generation) {
    if (ref.acquisition->released_by_token) return ReleasedByToken(ref.name);
    // The Hold's hold ended (lost, and forgotten or replaced by a later
    // grant): what the owner holds now is not this Hold's to release.
    return LostError(ref.name, "the hold ended before this release");
  }
  return PlanReleaseOf(it, ref, keep_for, report);
}

absl::StatusOr<ReleasePlan> HoldTable::PlanReleaseByOwner(
    const HoldKeyView& key, ReleaseReport& report) {
  auto it = holds_.find(key);
  if (it == holds_.end()) return ReleasePlan{};  // taken elsewhere (C6)
  return PlanReleaseOf(it,
                       HoldRef{.name = key.first,
                               .owner = key.second,
                               .generation = it->second.generation},
                       absl::ZeroDuration(), report);
}

absl::StatusOr<ReleasePlan> HoldTable::PlanReleaseOf(
    HoldMap<HoldEntry>::iterator it, const HoldRef& ref,
    absl::Duration keep_for, ReleaseReport& report) {
  ReleasePlan plan;
  HoldEntry& hold = it->second;
  LatchDeadline(it->first, hold, clock_.Now());
  if (hold.lost) {
    // Known without asking the backend, which may be unreachable now; what
    // may remain of the hold there is being let go already.
    absl::Status why = hold.lost_reason;
    holds_.erase(it);
    return LostBeforeRelease(ref.name, why);
  }
  if (ref.acquisition != nullptr && !HasAcquisition(hold, ref.acquisition)) {
    return ReleasedByToken(ref.name);
  }
  if (keep_for > absl::ZeroDuration() && hold.local_holds > 1) {
    // Keeping the lock is for the owner's last hold: the others would be
    // left holding nothing. Nothing changed: the Hold stays.
    return AcquisitionsStandingError(ref.name, hold.local_holds - 1);
  }
  plan.generation = hold.generation;
  plan.record = hold.record;
  report.fencing_token = hold.fencing_token;
  if (hold.local_holds > 1) {
    TakeInner(hold, ref, report);
  } else {
    GiveUp(it, ref, plan, report);
  }
  return plan;
}

void HoldTable::TakeInner(HoldEntry& hold, const HoldRef& ref,
                          ReleaseReport& report) {
  --hold.local_holds;
  // The acquisition's callback goes with it; by token, the innermost's
  // (releases of one owner are taken as nested).
  std::vector<Acquisition>& acquisitions = hold.acquisitions;
  auto own = FindAcquisition(hold, ref.acquisition);
  if (own != acquisitions.end()) {
    report.tell = true;
    report.granted = own->granted;
    acquisitions.erase(own);
  } else if (!acquisitions.empty()) {
    report.tell = true;
    report.granted = acquisitions.back().granted;
    acquisitions.back().share->released_by_token = true;  // its Hold asks
    acquisitions.pop_back();
  }
  report.last = acquisitions.empty();
}

void HoldTable::GiveUp(HoldMap<HoldEntry>::iterator it, const HoldRef& ref,
                       ReleasePlan& plan, ReleaseReport& report) {
  HoldEntry& hold = it->second;
  // Renewal stops now, whatever the backend answers (C21), and an
  // acquisition of the same key waits for the answer.
  plan.final_release = true;
  report.tell = !hold.acquisitions.empty();
  report.last = true;
  if (report.tell) {
    auto own = FindAcquisition(hold, ref.acquisition);
    report.granted = own != hold.acquisitions.end()
                         ? own->granted
                         : hold.acquisitions.back().granted;
  }
  if (ref.acquisition == nullptr) {
    // A Hold of this client may stand for what a release by owner token
    // takes: it must learn that it was released, not lost.
    for (Acquisition& a : hold.acquisitions) a.share->released_by_token = true;
  }
  plan.holds = AllHoldsOf(hold);
  // Bounded by the hold's deadline (hold_unconfirmed.cc).
  AwaitConfirmation(it, plan);
}

absl::Status HoldTable::FinishInnerRelease(const HoldKey& key,
                                           const ReleasePlan& plan,
                                           const absl::Status& result,
                                           std::vector<LossNotice>& notices) {
  if (plan.generation == 0) return result;
  auto it = holds_.find(key);
  if (result.ok() || it == holds_.end() ||
      it->second.generation != plan.generation) {
    return absl::OkStatus();
  }
  if (IsGone(result)) {
    if (!it->second.lost) {
      MarkLost(key, it->second, result, LossCause::kGone, Leftover::kGone,
               notices);
    }
    holds_.erase(it);
    return LostBeforeRelease(key.first, result);
  }
  // Taken off here; the final release takes it off the backend too (or the
  // lease, if the client goes away first).
  ++it->second.unsynced;
  return absl::OkStatus();
}

absl::Status HoldTable::Keep(const HoldRef& ref, ReleaseReport& report) {
  auto it = holds_.find(HoldKeyView(ref.name, ref.owner));
  if (it == holds_.end() || it->second.generation != ref.generation) {
    return LostError(ref.name, "the hold ended before it was kept");
  }
  HoldEntry& hold = it->second;
  if (LatchDeadline(it->first, hold, clock_.Now())) {
    return LostError(ref.name, hold.lost_reason.message());
  }
  if (hold.renewed) return WatchdogRenewedError(ref.name);
  auto own = FindAcquisition(hold, ref.acquisition);
  if (own == hold.acquisitions.end()) return ReleasedByToken(ref.name);
  report = ReleaseReport{.tell = true,
                         .fencing_token = hold.fencing_token,
                         .granted = own->granted};
  hold.acquisitions.erase(own);
  report.last = hold.acquisitions.empty();
  ++hold.kept;
  return absl::OkStatus();
}

absl::StatusOr<HoldTable::RenewPlan> HoldTable::PlanRenewal(
    const HoldKey& key, uint64_t generation) {
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.generation != generation) {
    return LostError(key.first, "the hold ended before this renewal");
  }
  return PlanRenewalOf(key, it->second);
}

absl::StatusOr<HoldTable::RenewPlan> HoldTable::PlanRenewalByOwner(
    const HoldKey& key, absl::Duration default_lease) {
  auto it = holds_.find(key);
  if (it == holds_.end()) {
    return RenewPlan{.lease = default_lease};  // taken elsewhere (C6)
  }
  return PlanRenewalOf(key, it->second);
}

absl::StatusOr<HoldTable::RenewPlan> HoldTable::PlanRenewalOf(
    const HoldKey& key, HoldEntry& hold) {
  LatchDeadline(key, hold, clock_.Now());
  if (hold.lost) {
    // Never renewed back to life, here or on the backend.
    return LostError(key.first, hold.lost_reason.message());
  }
  return RenewPlan{.lease = hold.lease,
                   .generation = hold.generation,
                   .fencing_token = hold.fencing_token,
                   .record = hold.record};
}

void HoldTable::FinishRenewal(const HoldKey& key, uint64_t generation,
                              absl::Duration lease, MonoTime sent,
                              const absl::Status& result,
                              std::vector<LossNotice>& notices) {
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.generation != generation ||
      it->second.lost) {
    return;
  }
  HoldEntry& hold = it->second;
  hold.max_lease = std::max(hold.max_lease, lease);
  // A confirmation that comes after the deadline does not bring the hold
  // back: it may have been seen lost meanwhile.
  if (LatchDeadline(key, hold, clock_.Now())) return;
  if (result.ok()) {
    hold.valid_until = std::max(hold.valid_until, LocalDeadline(sent, lease));
    WakeFor(key, hold);
  } else if (IsGone(result)) {
    MarkLost(key, hold, result, LossCause::kGone, Leftover::kGone, notices);
  }
}

std::vector<DueRenewal> HoldTable::DueRenewals(MonoTime now) {
  std::vector<DueRenewal> due;
  auto is_due = [](const HoldEntry& hold, MonoTime at) {
    return hold.renewed && !hold.lost && hold.next_renewal <= at;
  };
  if (std::none_of(holds_.begin(), holds_.end(), [&](const auto& entry) {
        return is_due(entry.second, now);
      })) {
    return due;
  }
  // Holds due a little later ride along: holds taken moments apart then
  // share one batch instead of queueing one round trip after another.
  for (const auto& [key, hold] : holds_) {
    if (is_due(hold, now + hold.lease / 10)) {
      due.push_back(DueRenewal{key, hold.generation, hold.fencing_token,
                               hold.lease, hold.record});
    }
  }
  return due;
}

void HoldTable::FinishRenewals(const std::vector<DueRenewal>& due,
                               const std::vector<absl::Status>& results,
                               MonoTime sent) {
  const MonoTime after = clock_.Now();
  for (size_t i = 0; i < due.size(); ++i) {
    auto it = holds_.find(due[i].key);
    // Released, or released and taken again, or lost meanwhile.
    if (it == holds_.end() || it->second.generation != due[i].generation) {
      continue;
    }
    HoldEntry& hold = it->second;
    // A confirmation after the deadline does not bring the hold back: it
    // may have been seen lost meanwhile (C19, C20).
    if (LatchDeadline(it->first, hold, after)) continue;
    const absl::Status& result =
        i < results.size() ? results[i]
                           : absl::InternalError("backend lost a renewal");
    if (result.ok()) {
      hold.valid_until =
          std::max(hold.valid_until, LocalDeadline(sent, due[i].lease));
      hold.next_renewal = sent + due[i].lease / 3;
      hold.renewal_error = absl::OkStatus();
    } else if (IsGone(result)) {
      MarkLostQueued(it->first, hold, result, LossCause::kGone,
                     Leftover::kGone);
    } else {
      // Transient: try again soon; the notifier ends the hold at its
      // deadline if no renewal gets through by then.
      hold.renewal_error = result;
      hold.next_renewal = after + RetryEvery(hold.lease);
    }
  }
  alarms_.notifier().Signal();  // deadlines moved
}

MonoTime HoldTable::NextRenewal() const {
  MonoTime next = MonoTime::InfiniteFuture();
  for (const auto& [key, hold] : holds_) {
    if (hold.renewed && !hold.lost) next = std::min(next, hold.next_renewal);
  }
  return next;
}

std::vector<Acquisition>::iterator HoldTable::FindAcquisition(
    HoldEntry& hold, const AcquisitionShare* share) {
  return std::find_if(
      hold.acquisitions.begin(), hold.acquisitions.end(),
      [share](const Acquisition& a) { return a.share.get() == share; });
}

bool HoldTable::HasAcquisition(const HoldEntry& hold,
                               const AcquisitionShare* share) {
  return std::any_of(
      hold.acquisitions.begin(), hold.acquisitions.end(),
      [share](const Acquisition& a) { return a.share.get() == share; });
}

absl::Status HoldTable::ReleasedByToken(absl::string_view name) {
  return WithContext(NotOwnerError(name),
                     "this acquisition was released by its owner token "
                     "(LockClient::OwnerTokens())");
}

HoldsToRelease HoldTable::AllHoldsOf(const HoldEntry& hold) {
  // A thread owner is this client's alone: whatever the backend counts for
  // it (acquisitions whose reply was lost included) is this hold's.
  if (hold.owner_kind == OwnerKind::kThread) return HoldsToRelease{.all = true};
  return HoldsToRelease{.count = hold.local_holds + hold.unsynced};
}

MonoTime HoldTable::LocalDeadline(MonoTime sent, absl::Duration lease) const {
  return sent + lease - DriftMargin(lease);
}

MonoTime HoldTable::DeadlineOf(const HoldKeyView& key,
                               const HoldEntry& hold) const {
  return std::min(
      {hold.valid_until, liveness_until_, bound_(key, hold.record.get())});
}

MonoTime HoldTable::NoticeAt(const HoldKeyView& key,
                             const HoldEntry& hold) const {
  return DeadlineOf(key, hold) - NoticeLeadFor(hold.lease);
}

absl::Duration HoldTable::NoticeLeadFor(absl::Duration lease) const {
  return NoticeLead(lease, wake_lateness_, std::min(lease, liveness_ttl_));
}

}  // namespace dlock::internal
