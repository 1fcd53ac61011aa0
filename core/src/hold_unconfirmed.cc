// The hold table's final releases not confirmed yet: once a final release
// starts, its hold is no longer believed (C19); if the backend has not
// confirmed the release when the hold's notice time comes, the hold is told
// lost then, once (C20), while the release goes on in the background (C21).
// A release the backend confirms in time ends the hold in silence.
#include "absl/strings/str_cat.h"
#include "hold_table.h"
#include "lease_policy.h"

namespace dlock::internal {
namespace {

constexpr absl::string_view kLeaseEndedFirst =
    "the lease ended before the release was confirmed";

}  // namespace

absl::Status HoldTable::LeaseEndedFirst(absl::string_view name) {
  return LostError(name, kLeaseEndedFirst);
}

void HoldTable::AwaitConfirmation(HoldMap<HoldEntry>::iterator it,
                                  ReleasePlan& plan) {
  const HoldKey key = it->first;
  HoldEntry& hold = it->second;
  plan.max_lease = hold.max_lease;
  plan.notice_at = NoticeAt(key, hold);
  // An earlier hold of the key may still await its own confirmation (an
  // acquisition in flight when its release began was granted after it):
  // each is settled on its own.
  unconfirmed_.emplace(
      hold.generation,
      UnconfirmedRelease{
          .key = key, .hold = std::move(hold), .notice_at = plan.notice_at});
  holds_.erase(it);
  pending_.BeginFinalRelease(key);
  alarms_.NotifierDue(plan.notice_at);
}

bool HoldTable::AwaitsConfirmation(const ReleasePlan& plan) const {
  return unconfirmed_.contains(plan.generation);
}

absl::Status HoldTable::FinishFinalRelease(
    const HoldKey& key, const ReleasePlan& plan, const absl::Status& result,
    absl::Duration keep_for, MonoTime sent, std::vector<LossNotice>& notices,
    ReleaseReport& report) {
  pending_.EndFinalRelease(key);
  report.result = result;
  if (!result.ok() && !IsGone(result)) {
    // The backend, if it took the release, keeps the lock from no earlier
    // than `sent`: a retry keeps it until the same moment (C21). Once
    // Close() began, its last pass sends it.
    pending_.Add(key, plan.holds, plan.max_lease, plan.record,
                 keep_for > absl::ZeroDuration() ? sent + keep_for
                                                 : MonoTime::InfinitePast(),
                 plan.generation);
  }
  auto it = unconfirmed_.find(plan.generation);
  if (it == unconfirmed_.end()) {
    // Told already: the notice time (or Close()) came before the answer.
    report.tell = false;
    return LeaseEndedFirst(key.first);
  }
  if (result.ok()) {
    unconfirmed_.erase(it);
    return absl::OkStatus();
  }
  if (IsGone(result)) {
    // The release is what found the loss: it is told now (C20).
    report.tell = false;
    TellUnconfirmed(it, result, LossCause::kGone, &notices);
    return LostBeforeRelease(key.first, result);
  }
  report.given_up = true;
  it->second.release_observed = report.tell;
  return WithContext(result,
                     "the hold is given up, and its release is retried in the "
                     "background until the backend confirms it; if its lease "
                     "ends first, the hold is told lost then");
}

void HoldTable::TellUnconfirmedNow(const ReleasePlan& plan,
                                   std::vector<LossNotice>& out) {
  auto it = unconfirmed_.find(plan.generation);
  if (it == unconfirmed_.end()) return;
  TellUnconfirmed(it, absl::FailedPreconditionError(kLeaseEndedFirst),
                  LossCause::kUnconfirmed, &out);
}

void HoldTable::TellUnconfirmed(UnconfirmedMap::iterator it,
                                absl::Status reason, LossCause cause,
                                std::vector<LossNotice>* out) {
  std::vector<LossNotice> queued;
  std::vector<LossNotice>& to = out != nullptr ? *out : queued;
  const size_t before = to.size();
  // What may be left on the backend is a pending release's already.
  MarkLost(it->second.key, it->second.hold, std::move(reason), cause,
           Leftover::kGone, to);
  if (it->second.release_observed) {
    // The observer heard of the release (OnRelease): one end per hold.
    for (size_t i = before; i < to.size(); ++i) to[i].observe = false;
  }
  unconfirmed_.erase(it);
  if (out == nullptr) {
    for (LossNotice& d : queued) queued_.push_back(std::move(d));
    alarms_.notifier().Signal();
  }
}

MonoTime HoldTable::TellUnconfirmedDue(MonoTime now) {
  MonoTime next = MonoTime::InfiniteFuture();
  for (auto it = unconfirmed_.begin(); it != unconfirmed_.end();) {
    if (now < it->second.notice_at) {
      next = std::min(next, it->second.notice_at);
      ++it;
      continue;
    }
    auto due = it++;
    TellUnconfirmed(due, absl::FailedPreconditionError(kLeaseEndedFirst),
                    LossCause::kUnconfirmed, nullptr);
    alarms_.released().Signal();  // a caller waiting for the answer gives up
  }
  return next;
}

void HoldTable::ReleaseConfirmed(const std::vector<uint64_t>& generations) {
  for (uint64_t generation : generations) unconfirmed_.erase(generation);
}

}  // namespace dlock::internal
