#include "notifier.h"

#include <optional>

namespace dlock::internal {

void Notifier::Run() {
  absl::MutexLock lock(&state_.mu);
  while (!state_.closed) {
    state_.alarms.NotifierPlans(MonoTime::InfinitePast());  // busy
    const MonoTime now = state_.clock.Now();
    state_.holds.SetWakeLateness(state_.wake_lateness->Recent(now));
    const MonoTime next = state_.holds.ExpireOverdue(now);
    if (std::optional<LossNotice> notice = state_.holds.TakeQueuedNotice()) {
      // One notice at a time, with deadlines checked again in between, so
      // that a slow callback delays the others as little as it can.
      std::vector<LossNotice> one;
      one.push_back(*std::move(notice));
      state_.mu.Unlock();
      Deliver(one);
      state_.mu.Lock();
      continue;
    }
    state_.alarms.NotifierPlans(next);
    if (!state_.alarms.notifier().WaitUntil(&state_.mu, next)) {
      // Woken by the clock: how late the scheduler ran this thread (with
      // the client's mutex taken again) is how much sooner notices go.
      state_.wake_lateness->Observe(next, state_.clock.Now());
    }
  }
}

void Notifier::Deliver(std::vector<LossNotice>& notices) const {
  for (LossNotice& d : notices) {
    // Tokens first: work watching them stops before slower callbacks run.
    for (const CancelToken& token : d.tokens) token.Cancel();
    for (const LockLostCallback& callback : d.callbacks) callback(d.event);
    if (state_.options.on_lost) state_.options.on_lost(d.event);
    // After the callbacks, as the observer's contract says. A hold whose
    // acquisitions were all left to run out was told as released.
    if (state_.observer && d.observe && !d.tokens.empty()) {
      state_.observer.Tell(&LockObserver::OnLoss,
                           LossEvent{.lock_namespace = state_.lock_namespace,
                                     .name = d.event.name,
                                     .owner = d.event.owner,
                                     .fencing_token = d.event.fencing_token,
                                     .cause = d.cause,
                                     .reason = d.event.reason,
                                     .held = state_.clock.Now() - d.granted,
                                     .kind = d.event.kind,
                                     .shared = d.event.shared});
    }
  }
  notices.clear();
}

}  // namespace dlock::internal
