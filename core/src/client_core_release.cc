// The client core's releases, keeps and renewals on callers' threads: each
// decides what to send under the lock (HoldTable), calls the backend without
// it, records the answer under it, and tells the losses it found with no
// lock held.
#include "absl/strings/str_cat.h"
#include "client_core.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

absl::Status ClientCore::ReleaseByToken(absl::string_view name,
                                        absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = TokenOwnerOf(owner_token);
  if (!owner.ok()) return owner.status();
  return Release(HoldRef{.name = name, .owner = *owner}, ReleaseOf::kOwner,
                 absl::ZeroDuration());
}

absl::Status ClientCore::ReleaseAcquisition(const HoldRef& ref,
                                            absl::Duration keep_for) {
  if (keep_for > absl::ZeroDuration() && !traits_.keeps_after_release) {
    // Said here once for every backend: nothing changes, the Hold stays.
    return absl::UnimplementedError(
        absl::StrCat("the backend at ", state_.endpoint,
                     " cannot keep a lock after its release (BackendTraits::"
                     "keeps_after_release): release lock '",
                     ref.name, "' instead"));
  }
  if (keep_for > absl::ZeroDuration()) {
    if (absl::Status s = CheckKeepable(ref); !s.ok()) return s;
  }
  return Release(ref, ReleaseOf::kAcquisition, keep_for);
}

absl::Status ClientCore::CheckKeepable(const HoldRef& ref) {
  if (IsQualified(ref.name)) {
    return absl::UnimplementedError(absl::StrCat(
        "Hold::ReleaseAndKeepFor() keeps a lock taken after its writer's "
        "release; ",
        ObjectPhrase(ref.name),
        " is not a lock's writer: release it instead (nothing changed)"));
  }
  // A write hold whose owner also reads here: keeping the lock would leave
  // the read standing in a lock held by nobody.
  const std::string read = QualifiedName(
      ref.name,
      HoldShape{.kind = ObjectKind::kLock, .mode = HoldMode::kShared});
  if (traits_.read_write_locks && Believes(read, ref.owner)) {
    return WithContext(AcquisitionsStandingError(ref.name, 1),
                       "this owner's read lock of it stands");
  }
  return absl::OkStatus();
}

absl::Status ClientCore::Release(const HoldRef& ref, ReleaseOf which,
                                 absl::Duration keep_for) {
  std::vector<LossNotice> notices;
  ReleaseReport report;
  absl::Status released;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    released = ReleaseHold(ref, which, keep_for, notices, report);
  }
  if (state_.observer && report.tell) {
    TellRelease(ref, report, /*kept=*/false);
    if (report.given_up) {
      state_.TellReleaseFailure(HoldKeyView(ref.name, ref.owner),
                                ReleaseFailureEvent::Stage::kCaller,
                                report.result);
    }
  }
  // Without ops_mu_: a callback may call the client, even Close().
  notifier_.Deliver(notices);
  return released;
}

absl::Status ClientCore::ReleaseHold(const HoldRef& ref, ReleaseOf which,
                                     absl::Duration keep_for,
                                     std::vector<LossNotice>& notices,
                                     ReleaseReport& report) {
  const HoldKey key(ref.name, ref.owner);
  absl::StatusOr<ReleasePlan> plan;
  {
    absl::MutexLock lock(&state_.mu);
    if (state_.closed) return state_.ClosedError();
    plan = which == ReleaseOf::kOwner
               ? state_.holds.PlanReleaseByOwner(key, report)
               : state_.holds.PlanRelease(ref, keep_for, report);
  }
  if (!plan.ok()) return plan.status();
  if (plan->final_release) {
    return SendFinalRelease(key, *plan, keep_for, notices, report);
  }
  absl::StatusOr<int64_t> left = state_.backend->Release(
      CallOf(key, *plan, /*keep_for=*/absl::ZeroDuration()));
  report.result = left.status();
  // A release that finds the hold gone is told as its loss instead.
  if (IsGone(report.result)) report.tell = false;
  absl::MutexLock lock(&state_.mu);
  return state_.holds.FinishInnerRelease(key, *plan, left.status(), notices);
}

ReleaseCall ClientCore::CallOf(const HoldKey& key, const ReleasePlan& plan,
                               absl::Duration keep_for) {
  return ReleaseCall{.name = ObjectNameOf(key.first),
                     .owner = key.second,
                     .holds = plan.holds.count,
                     .all_holds = plan.holds.all,
                     .record = plan.record.get(),
                     .keep_for = keep_for,
                     .shape = ShapeOf(key.first)};
}

absl::Status ClientCore::SendFinalRelease(const HoldKey& key,
                                          const ReleasePlan& plan,
                                          absl::Duration keep_for,
                                          std::vector<LossNotice>& notices,
                                          ReleaseReport& report) {
  const MonoTime sent = state_.clock.Now();
  if (plan.notice_at - sent > kInlineReleaseHorizon) {
    // Far from the deadline: the backend's own call timeout ends the call
    // well before it, so the caller's thread sends it (no hand-off).
    absl::StatusOr<int64_t> left =
        state_.backend->Release(CallOf(key, plan, keep_for));
    absl::MutexLock lock(&state_.mu);
    return SettleFinalRelease(key, plan, keep_for, sent, left.status(), notices,
                              report);
  }
  // Near the deadline: a helper thread sends it, so that the caller can be
  // answered at the deadline whatever the network does.
  auto outcome = std::make_shared<HelperOutcome>();
  std::thread([self = shared_from_this(), key, plan, keep_for, outcome] {
    self->SendFinalReleaseOnHelper(key, plan, keep_for, outcome);
  }).detach();
  absl::MutexLock lock(&state_.mu);
  while (!outcome->done) {
    const bool untold = state_.holds.AwaitsConfirmation(plan);
    if (state_.closed || !untold || state_.clock.Now() >= plan.notice_at) {
      // No answer by the notice time: told now (unless the notifier or
      // Close() was first), on this thread, before Release() returns.
      outcome->abandoned = true;
      report.tell = false;
      if (state_.closed) return state_.ClosedError();  // Close() tells it
      if (untold) state_.holds.TellUnconfirmedNow(plan, notices);
      report.result = HoldTable::LeaseEndedFirst(key.first);
      return report.result;
    }
    state_.alarms.released().WaitUntil(&state_.mu, plan.notice_at);
  }
  return SettleFinalRelease(key, plan, keep_for, outcome->sent, outcome->left,
                            notices, report);
}

void ClientCore::SendFinalReleaseOnHelper(
    const HoldKey& key, const ReleasePlan& plan, absl::Duration keep_for,
    std::shared_ptr<HelperOutcome> outcome) {
  MonoTime sent;
  absl::Status left = state_.ClosedError();
  std::vector<LossNotice> notices;
  {
    // Close() shuts the backend down only once no call holds ops_mu_, and
    // sends what this release leaves pending once it is settled.
    absl::ReaderMutexLock in_flight(&ops_mu_);
    bool closed = false;
    {
      absl::MutexLock lock(&state_.mu);
      closed = state_.closed;
    }
    sent = state_.clock.Now();
    if (!closed) {
      left = state_.backend->Release(CallOf(key, plan, keep_for)).status();
    }
    absl::MutexLock lock(&state_.mu);
    if (!outcome->abandoned) {
      outcome->done = true;
      outcome->sent = sent;
      outcome->left = left;
      state_.alarms.released().Signal();
      return;
    }
    ReleaseReport unread;  // the caller was answered at the deadline
    SettleFinalRelease(key, plan, keep_for, sent, left, notices, unread)
        .IgnoreError();
  }
  state_.TellReleaseFailure(key, ReleaseFailureEvent::Stage::kBackground, left);
  notifier_.Deliver(notices);
}

absl::Status ClientCore::SettleFinalRelease(
    const HoldKey& key, const ReleasePlan& plan, absl::Duration keep_for,
    MonoTime sent, const absl::Status& left, std::vector<LossNotice>& notices,
    ReleaseReport& report) {
  // Once told, Close() was what told it if the client is closed.
  const bool told_by_close =
      state_.closed && !state_.holds.AwaitsConfirmation(plan);
  absl::Status answer = state_.holds.FinishFinalRelease(
      key, plan, left, keep_for, sent, notices, report);
  return told_by_close ? state_.ClosedError() : answer;
}

absl::Status ClientCore::KeepUntilLeaseEnd(const HoldRef& ref) {
  ReleaseReport report;
  absl::Status kept;
  {
    absl::MutexLock lock(&state_.mu);
    kept =
        state_.closed ? state_.ClosedError() : state_.holds.Keep(ref, report);
  }
  if (state_.observer && report.tell) TellRelease(ref, report, /*kept=*/true);
  return kept;
}

void ClientCore::TellRelease(const HoldRef& ref, const ReleaseReport& report,
                             bool kept) const {
  const HoldShape shape = ShapeOf(ref.name);
  state_.observer.Tell(&LockObserver::OnRelease,
                       ReleaseEvent{.lock_namespace = state_.lock_namespace,
                                    .name = ObjectNameOf(ref.name),
                                    .owner = ref.owner,
                                    .fencing_token = report.fencing_token,
                                    .held = state_.clock.Now() - report.granted,
                                    .last = report.last,
                                    .result = report.result,
                                    .kept_until_lease_end = kept,
                                    .kind = shape.kind,
                                    .shared = shape.mode == HoldMode::kShared});
}

absl::Status ClientCore::RenewAcquisition(const HoldRef& ref,
                                          std::optional<absl::Duration> lease) {
  return Renew(HoldKey(ref.name, ref.owner), ref.generation, lease);
}

absl::Status ClientCore::RenewByToken(absl::string_view name,
                                      absl::string_view owner_token,
                                      std::optional<absl::Duration> lease) {
  absl::StatusOr<std::string> owner = TokenOwnerOf(owner_token);
  if (!owner.ok()) return owner.status();
  return Renew(HoldKey(name, *owner), std::nullopt, lease);
}

absl::Status ClientCore::Renew(const HoldKey& key,
                               std::optional<uint64_t> hold_generation,
                               std::optional<absl::Duration> lease) {
  std::vector<LossNotice> notices;
  absl::Status renewed;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    absl::StatusOr<HoldTable::RenewPlan> plan;
    {
      absl::MutexLock lock(&state_.mu);
      if (state_.closed) return state_.ClosedError();
      plan = hold_generation.has_value()
                 ? state_.holds.PlanRenewal(key, *hold_generation)
                 : state_.holds.PlanRenewalByOwner(
                       key, state_.options.watchdog_lease);
    }
    if (!plan.ok()) return plan.status();
    const absl::Duration effective = lease.value_or(plan->lease);
    if (absl::Status s = ValidateLease(effective); !s.ok()) return s;
    const MonoTime sent = state_.clock.Now();
    renewed = state_.backend->Renew(RenewCall{.name = ObjectNameOf(key.first),
                                              .owner = key.second,
                                              .lease = effective,
                                              .record = plan->record.get(),
                                              .shape = ShapeOf(key.first)});
    if (state_.observer) {
      state_.observer.Tell(
          &LockObserver::OnRenewal,
          RenewalEvent{.lock_namespace = state_.lock_namespace,
                       .name = ObjectNameOf(key.first),
                       .owner = key.second,
                       .fencing_token = plan->fencing_token,
                       .by_watchdog = false,
                       .result = renewed,
                       .kind = ShapeOf(key.first).kind,
                       .shared = ShapeOf(key.first).mode == HoldMode::kShared});
    }
    absl::MutexLock lock(&state_.mu);
    state_.holds.FinishRenewal(key, plan->generation, effective, sent, renewed,
                               notices);
  }
  // Without ops_mu_: a callback may call the client, even Close().
  notifier_.Deliver(notices);
  return renewed;
}

}  // namespace dlock::internal
