// The client core's final releases, bounded by the hold's local deadline:
// once a final release starts, its hold is no longer believed (C19); if the
// backend has not confirmed the release when the hold's notice time comes,
// the hold is told lost then, once (C20), and the caller is answered then
// too, while the release goes on in the background (C21). A release the
// backend confirms in time ends the hold in silence.
#include <thread>

#include "absl/strings/str_cat.h"
#include "client_core.h"
#include "lease_policy.h"

namespace dlock::internal {
namespace {

constexpr absl::string_view kLeaseEndedFirst =
    "the lease ended before the release was confirmed";

}  // namespace

ReleaseCall ClientCore::CallOf(const FinalRelease& r) {
  return ReleaseCall{.name = r.key.first,
                     .owner = r.key.second,
                     .holds = r.holds,
                     .record = r.record.get(),
                     .keep_for = r.keep_for};
}

ClientCore::FinalRelease ClientCore::GiveUp(const HoldKey& key, HoldEntry& hold,
                                            absl::Duration keep_for) {
  FinalRelease r{.key = key,
                 .generation = hold.generation,
                 .holds = AllHoldsOf(key.second, hold),
                 .record = hold.record,
                 .keep_for = keep_for,
                 .max_lease = hold.max_lease,
                 .notice_at = DeadlineOf(key, hold) - NoticeLead(hold.lease)};
  if (auto earlier = unconfirmed_.find(key); earlier != unconfirmed_.end()) {
    // Not expected (an acquisition waits for a release of its key), but
    // an earlier hold still untold is told rather than forgotten (C20).
    TellUnconfirmed(earlier, absl::FailedPreconditionError(kLeaseEndedFirst),
                    LossCause::kUnconfirmed, nullptr);
  }
  unconfirmed_.emplace(key, UnconfirmedRelease{.hold = std::move(hold),
                                               .notice_at = r.notice_at});
  ++releasing_[HoldKeyHash()(key)];
  if (r.notice_at < notifier_wakes_at_) notifier_wake_.Signal();
  return r;
}

absl::Status ClientCore::SendFinalRelease(const FinalRelease& r,
                                          std::vector<Delivery>& deliveries,
                                          ReleaseReport& report) {
  const MonoTime sent = clock_.Now();
  if (r.notice_at - sent > kInlineReleaseHorizon) {
    // Far from the deadline: the backend's own call timeout ends the call
    // well before it, so the caller's thread sends it (no hand-off).
    absl::StatusOr<int64_t> left = backend_->Release(CallOf(r));
    absl::MutexLock lock(&mu_);
    return SettleFinalRelease(r, sent, left, deliveries, report);
  }
  // Near the deadline: a helper thread sends it, so that the caller can be
  // answered at the deadline whatever the network does.
  auto outcome = std::make_shared<HelperOutcome>();
  std::thread([self = shared_from_this(), r, outcome] {
    self->SendFinalReleaseOnHelper(r, outcome);
  }).detach();
  absl::MutexLock lock(&mu_);
  while (!outcome->done) {
    auto it = unconfirmed_.find(r.key);
    const bool untold =
        it != unconfirmed_.end() && it->second.hold.generation == r.generation;
    if (closed_ || !untold || clock_.Now() >= r.notice_at) {
      // No answer by the notice time: told now (unless the notifier or
      // Close() was first), on this thread, before Release() returns.
      outcome->abandoned = true;
      report.tell = false;
      if (closed_) return ClosedError();  // Close() tells it
      if (untold) {
        TellUnconfirmed(it, absl::FailedPreconditionError(kLeaseEndedFirst),
                        LossCause::kUnconfirmed, &deliveries);
      }
      report.result = LostError(r.key.first, kLeaseEndedFirst);
      return report.result;
    }
    released_.WaitUntil(&mu_, r.notice_at);
  }
  return SettleFinalRelease(r, outcome->sent, outcome->left, deliveries,
                            report);
}

void ClientCore::SendFinalReleaseOnHelper(
    const FinalRelease& r, std::shared_ptr<HelperOutcome> outcome) {
  MonoTime sent;
  absl::StatusOr<int64_t> left = ClosedError();
  {
    // Close() shuts the backend down only once no call holds ops_mu_.
    absl::ReaderMutexLock in_flight(&ops_mu_);
    bool closed = false;
    {
      absl::MutexLock lock(&mu_);
      closed = closed_;
    }
    sent = clock_.Now();
    if (!closed) left = backend_->Release(CallOf(r));
  }
  std::vector<Delivery> deliveries;
  {
    absl::MutexLock lock(&mu_);
    if (!outcome->abandoned) {
      outcome->done = true;
      outcome->sent = sent;
      outcome->left = left;
      released_.Signal();
      return;
    }
    ReleaseReport unread;  // the caller was answered at the deadline
    SettleFinalRelease(r, sent, left, deliveries, unread).IgnoreError();
  }
  TellReleaseFailure(r.key, ReleaseFailureEvent::Stage::kBackground,
                     left.status());
  Deliver(deliveries);
}

absl::Status ClientCore::SettleFinalRelease(const FinalRelease& r,
                                            MonoTime sent,
                                            const absl::StatusOr<int64_t>& left,
                                            std::vector<Delivery>& deliveries,
                                            ReleaseReport& report) {
  const size_t key_hash = HoldKeyHash()(r.key);
  if (--releasing_[key_hash] == 0) releasing_.erase(key_hash);
  released_.Signal();
  report.result = left.status();
  const absl::string_view name = r.key.first;
  const bool transient = !left.ok() && !IsGone(left.status());
  if (transient && !closed_) {
    // The backend, if it took the release, keeps the lock from no earlier
    // than `sent`: a retry keeps it until the same moment (C21).
    AddPendingRelease(r.key, r.holds, r.max_lease, r.record,
                      r.keep_for > absl::ZeroDuration()
                          ? sent + r.keep_for
                          : MonoTime::InfinitePast());
  }
  auto it = unconfirmed_.find(r.key);
  if (it == unconfirmed_.end() || it->second.hold.generation != r.generation) {
    // Told already: the notice time (or Close()) came before the answer.
    report.tell = false;
    return closed_ ? ClosedError() : LostError(name, kLeaseEndedFirst);
  }
  if (left.ok()) {
    unconfirmed_.erase(it);
    return absl::OkStatus();
  }
  if (IsGone(left.status())) {
    // The release is what found the loss: it is told now (C20).
    report.tell = false;
    TellUnconfirmed(it, left.status(), LossCause::kGone, &deliveries);
    return LostError(
        name, absl::StrCat(left.status().message(), " (before release)"));
  }
  report.given_up = true;
  it->second.release_observed = report.tell;
  return WithContext(left.status(),
                     "the hold is given up, and its release is retried in the "
                     "background until the backend confirms it; if its lease "
                     "ends first, the hold is told lost then");
}

void ClientCore::TellUnconfirmed(HoldMap<UnconfirmedRelease>::iterator it,
                                 absl::Status reason, LossCause cause,
                                 std::vector<Delivery>* out) {
  std::vector<Delivery> queued;
  std::vector<Delivery>& to = out != nullptr ? *out : queued;
  const size_t before = to.size();
  // What may be left on the backend is a pending release's already.
  MarkLost(it->first, it->second.hold, std::move(reason), cause,
           Leftover::kGone, to);
  if (it->second.release_observed) {
    // The observer heard of the release (OnRelease): one end per hold.
    for (size_t i = before; i < to.size(); ++i) to[i].observe = false;
  }
  unconfirmed_.erase(it);
  if (out == nullptr) {
    for (Delivery& d : queued) queued_.push_back(std::move(d));
    notifier_wake_.Signal();
  }
}

MonoTime ClientCore::TellUnconfirmedDue(MonoTime now) {
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
    released_.Signal();  // a caller waiting for the answer gives up now
  }
  return next;
}

void ClientCore::ReleaseConfirmed(const HoldKey& key) {
  unconfirmed_.erase(key);
}

}  // namespace dlock::internal
