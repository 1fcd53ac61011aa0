// The hold table's deadline side: losses and their notices (C20), the local
// deadline of each hold (C19), and holder liveness.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hold_table.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

void HoldTable::MarkLost(const HoldKey& key, HoldEntry& hold,
                         absl::Status reason, LossCause cause,
                         Leftover leftover, std::vector<LossNotice>& out) {
  if (hold.lost) return;
  hold.lost = true;
  hold.lost_reason = reason;
  if (leftover == Leftover::kRelease) {
    // The backend may still count the hold (a renewal got through
    // unanswered, the lease has a moment left): let it go, so that others
    // need not wait it out and the owner's next Acquire starts afresh (C21).
    // Not before the deadline: a notice told sooner, for a notifier that
    // wakes late, does not free the lock sooner (C2).
    pending_.Add(key, AllHoldsOf(hold), hold.max_lease, hold.record,
                 MonoTime::InfinitePast(), 0, DeadlineOf(key, hold));
  }
  const HoldShape shape = ShapeOf(key.first);
  LossNotice d{
      .event =
          LockLostEvent{.name = std::string(ObjectNameOf(key.first)),
                        .owner = key.second,
                        .fencing_token = hold.fencing_token,
                        .reason = WithKind(std::move(reason), ErrorKind::kLost),
                        .kind = shape.kind,
                        .shared = shape.mode == HoldMode::kShared},
      .cause = cause,
      .granted = hold.granted};
  // The acquisitions stay (their Holds still ask after them); what they
  // asked to be told goes.
  for (Acquisition& a : hold.acquisitions) {
    if (a.on_lost) d.callbacks.push_back(std::move(a.on_lost));
    a.on_lost = nullptr;
    d.tokens.push_back(a.share->lost);
  }
  out.push_back(std::move(d));
}

void HoldTable::MarkLostQueued(const HoldKey& key, HoldEntry& hold,
                               absl::Status reason, LossCause cause,
                               Leftover leftover) {
  std::vector<LossNotice> out;
  MarkLost(key, hold, std::move(reason), cause, leftover, out);
  if (out.empty()) return;
  for (LossNotice& d : out) queued_.push_back(std::move(d));
  alarms_.notifier().Signal();
}

void HoldTable::MarkLostByBackend(const HoldKeyView& key,
                                  const absl::Status& reason) {
  auto it = holds_.find(key);
  if (it != holds_.end()) {
    MarkLostQueued(it->first, it->second, reason, LossCause::kGone,
                   Leftover::kGone);
  }
}

std::optional<LossNotice> HoldTable::TakeQueuedNotice() {
  if (queued_.empty()) return std::nullopt;
  LossNotice notice = std::move(queued_.front());
  queued_.pop_front();
  return notice;
}

HoldTable::DeadlineLoss HoldTable::DeadlineReason(const HoldKey& key,
                                                  const HoldEntry& hold) const {
  const MonoTime backend_bound = bound_(key, hold.record.get());
  if (liveness_until_ < hold.valid_until && liveness_until_ <= backend_bound) {
    // Past here a waiter may take the lock over whatever its lease.
    return {absl::UnavailableError(absl::StrCat(
                "this client's liveness record (liveness_ttl ",
                absl::FormatDuration(liveness_ttl_),
                ") was not confirmed in time, so other clients may take its "
                "locks over",
                heartbeat_error_.ok()
                    ? ""
                    : absl::StrCat(": ", heartbeat_error_.message()))),
            LossCause::kUnconfirmed};
  }
  if (backend_bound < hold.valid_until) {
    return {absl::UnavailableError("the backend session that kept the hold "
                                   "can no longer be trusted"),
            LossCause::kUnconfirmed};
  }
  if (!hold.renewed) {
    return {absl::FailedPreconditionError(
                absl::StrCat("the lease of ", absl::FormatDuration(hold.lease),
                             " ran out before release")),
            LossCause::kLeaseEnded};
  }
  if (!hold.renewal_error.ok()) {
    return {absl::UnavailableError(
                absl::StrCat("the lease ran out while renewal kept failing: ",
                             hold.renewal_error.message())),
            LossCause::kUnconfirmed};
  }
  return {absl::UnavailableError(
              "the lease ran out before a renewal was confirmed"),
          LossCause::kUnconfirmed};
}

bool HoldTable::LatchDeadline(const HoldKey& key, HoldEntry& hold,
                              MonoTime now) {
  if (hold.lost) return true;
  if (now < NoticeAt(key, hold)) return false;
  if (hold.kept > 0 && hold.acquisitions.empty()) {
    // Left to run out (Hold::KeepUntilLeaseEnd): an end foreseen, not a
    // loss; nobody to tell, and the backend lets it go by itself.
    hold.lost = true;
    hold.lost_reason = LostError(key.first, "its lease ended as kept");
    return true;
  }
  DeadlineLoss loss = DeadlineReason(key, hold);
  MarkLostQueued(key, hold, std::move(loss.reason), loss.cause,
                 Leftover::kRelease);
  return true;
}

void HoldTable::WakeFor(const HoldKey& key, const HoldEntry& hold) {
  if (hold.lost) return;
  alarms_.NotifierDue(NoticeAt(key, hold));
  if (hold.renewed) alarms_.RenewerDue(hold.next_renewal);
  if (keeps_liveness()) alarms_.RenewerDue(next_heartbeat_);
}

MonoTime HoldTable::ExpireOverdue(MonoTime now) {
  MonoTime next = TellUnconfirmedDue(now);
  for (auto it = holds_.begin(); it != holds_.end();) {
    HoldEntry& hold = it->second;
    if (hold.kept > 0 && hold.acquisitions.empty()) {
      // Only kept acquisitions: nobody to tell, nothing to release. The
      // record goes once the backend has surely expired the hold.
      const MonoTime gone = hold.valid_until + 2 * DriftMargin(hold.lease);
      if (now >= gone) {
        holds_.erase(it++);
        continue;
      }
      next = std::min(next, gone);
      ++it;
      continue;
    }
    if (!hold.lost && !LatchDeadline(it->first, hold, now)) {
      next = std::min(next, NoticeAt(it->first, hold));
    }
    ++it;
  }
  return next;
}

std::vector<PendingReleases::Claim> HoldTable::CloseAll(
    const absl::Status& reason, const absl::Status& unconfirmed,
    std::vector<LossNotice>& out) {
  for (LossNotice& d : queued_) out.push_back(std::move(d));
  queued_.clear();
  std::vector<PendingReleases::Claim> to_release;
  for (auto& [key, hold] : holds_) {
    if (hold.lost) continue;
    // Renewal stops here: the backend frees it within its longest lease.
    const MonoTime lease_end =
        clock_.Now() + hold.max_lease + DriftMargin(hold.max_lease);
    to_release.push_back(PendingReleases::Claim{
        key, PendingReleases::Release{.holds = AllHoldsOf(hold),
                                      .record = hold.record,
                                      .give_up = lease_end}});
    MarkLost(key, hold, reason, LossCause::kClientClosed, Leftover::kGone, out);
  }
  holds_.clear();
  // Releases not confirmed yet: their holds end here too, told (C20); what
  // may remain of them is a pending release's, released by Close().
  while (!unconfirmed_.empty()) {
    TellUnconfirmed(unconfirmed_.begin(), unconfirmed, LossCause::kClientClosed,
                    &out);
  }
  return to_release;
}

// --- Holder liveness ---------------------------------------------------------

void HoldTable::KeepLiveness(absl::Duration ttl) {
  liveness_ttl_ = ttl;
  if (keeps_liveness()) liveness_until_ = MonoTime::InfinitePast();
}

bool HoldTable::LivenessWanted() const {
  if (!keeps_liveness()) return false;
  // A hold left to run out with its lease (Hold::KeepUntilLeaseEnd) has no
  // acquisition left, but the backend still ends it when this client's
  // record lapses: keep it up until the hold's lease ends.
  return std::any_of(holds_.begin(), holds_.end(), [](const auto& entry) {
    const HoldEntry& hold = entry.second;
    return !hold.lost && (!hold.acquisitions.empty() || hold.kept > 0);
  });
}

bool HoldTable::HeartbeatDue(MonoTime now) const {
  return now >= next_heartbeat_ && LivenessWanted();
}

void HoldTable::LivenessConfirmed(MonoTime sent) {
  const MonoTime until = LocalDeadline(sent, liveness_ttl_);
  if (until <= liveness_until_) return;
  // Holds whose notice time came under the old bound stay lost (C20), even
  // if the notifier has not looked yet: latched before the bound moves.
  const MonoTime now = clock_.Now();
  if (now >= liveness_until_ - NoticeLeadFor(absl::InfiniteDuration())) {
    ExpireOverdue(now);
  }
  liveness_until_ = until;
  next_heartbeat_ = std::max(next_heartbeat_, sent + liveness_ttl_ / 3);
  heartbeat_error_ = absl::OkStatus();
  // Deadlines only moved later: the notifier's planned look comes no later
  // than any of them still, so it is not woken (every grant comes here).
}

void HoldTable::HeartbeatConfirmed(MonoTime sent) {
  LivenessConfirmed(sent);
  next_heartbeat_ = sent + liveness_ttl_ / 3;
}

void HoldTable::HeartbeatFailed(const absl::Status& error) {
  // Tried again soon; the notifier ends every hold at liveness_until_ if no
  // refresh gets through by then.
  heartbeat_error_ = error;
  next_heartbeat_ = clock_.Now() + RetryEvery(liveness_ttl_);
}

}  // namespace dlock::internal
