#include "renewer.h"

#include <algorithm>
#include <vector>

#include "qualified_name.h"

namespace dlock::internal {

void Renewer::Run() {
  absl::MutexLock lock(&state_.mu);
  while (!state_.closed) {
    state_.alarms.RenewerPlans(MonoTime::InfinitePast());  // busy
    Heartbeat(state_.clock.Now());
    if (state_.closed) break;
    RenewDue(state_.clock.Now());
    if (state_.closed) break;
    RetryReleases(state_.clock.Now());
    if (state_.closed) break;
    const MonoTime next = NextWake();
    if (next > state_.clock.Now()) {
      state_.alarms.RenewerPlans(next);
      state_.alarms.renewer().WaitUntil(&state_.mu, next);
    }
  }
}

MonoTime Renewer::NextWake() const {
  MonoTime next = MonoTime::InfiniteFuture();
  // With no hold to keep live, a heartbeat time still ahead (a grant's) is
  // kept as the next look: the next grant, which only pushes it later, then
  // wakes nobody. Else each uncontended acquire woke this thread.
  const MonoTime heartbeat = state_.holds.next_heartbeat();
  if (state_.holds.LivenessWanted() || heartbeat > state_.clock.Now()) {
    next = heartbeat;
  }
  return std::min({next, state_.holds.NextRenewal(), state_.pending.NextTry()});
}

void Renewer::Heartbeat(MonoTime now) {
  if (!state_.holds.HeartbeatDue(now)) return;
  const absl::Duration ttl = state_.holds.liveness_ttl();
  // Sent without the lock, as renewals are; a heartbeat confirmed after the
  // deadline it would have extended changes nothing for holds already told
  // lost (LatchDeadline keeps them lost).
  state_.mu.Unlock();
  const MonoTime sent = state_.clock.Now();
  const absl::Status refreshed = state_.backend->RenewLiveness(ttl);
  state_.mu.Lock();
  if (refreshed.ok()) {
    state_.holds.HeartbeatConfirmed(sent);
  } else {
    state_.holds.HeartbeatFailed(refreshed);
  }
}

void Renewer::RenewDue(MonoTime now) {
  const std::vector<DueRenewal> due = state_.holds.DueRenewals(now);
  if (due.empty()) return;
  std::vector<RenewCall> calls;
  calls.reserve(due.size());
  for (const DueRenewal& d : due) {
    calls.push_back(RenewCall{.name = ObjectNameOf(d.key.first),
                              .owner = d.key.second,
                              .lease = d.lease,
                              .record = d.record.get(),
                              .shape = ShapeOf(d.key.first)});
  }
  // Renewed without the lock, so that acquires and releases go on meanwhile.
  state_.mu.Unlock();
  const MonoTime sent = state_.clock.Now();
  const std::vector<absl::Status> results = state_.backend->RenewMany(calls);
  if (state_.observer) {
    for (size_t i = 0; i < due.size() && i < results.size(); ++i) {
      state_.observer.Tell(
          &LockObserver::OnRenewal,
          RenewalEvent{.lock_namespace = state_.lock_namespace,
                       .name = ObjectNameOf(due[i].key.first),
                       .owner = due[i].key.second,
                       .fencing_token = due[i].fencing_token,
                       .by_watchdog = true,
                       .result = results[i],
                       .kind = calls[i].shape.kind,
                       .shared = calls[i].shape.mode == HoldMode::kShared});
    }
  }
  state_.mu.Lock();
  state_.holds.FinishRenewals(due, results, sent);
}

void Renewer::RetryReleases(MonoTime now) {
  const std::vector<PendingReleases::Claim> due = state_.pending.ClaimDue(now);
  if (due.empty()) return;
  state_.mu.Unlock();
  for (const PendingReleases::Claim& claim : due) {
    state_.SendRelease(claim, ReleaseFailureEvent::Stage::kBackground, nullptr);
  }
  state_.mu.Lock();
}

}  // namespace dlock::internal
