// Close() (C13): the threads stop, every believed hold is told lost and
// released, every release still pending is sent once more (riding out a
// failover), and the backend shuts down, within ClientOptions::close_timeout.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client_core.h"
#include "lease_policy.h"

namespace dlock::internal {

absl::Status ClientCore::Close() {
  {
    absl::MutexLock lock(&state_.mu);
    const bool started = state_.backend != nullptr;
    if (state_.closed || !started) {
      state_.closed = true;
      return absl::OkStatus();
    }
    state_.closed = true;
    state_.alarms.renewer().Signal();
    state_.alarms.notifier().Signal();
    state_.alarms.released().Signal();
  }
  closing_.Cancel();
  // A lost callback runs on the notifier's thread and may close its own
  // client: that thread cannot join itself; it ends once the callback
  // returns.
  for (std::thread* t : {&renewer_thread_, &notifier_thread_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();
    } else {
      t->join();
    }
  }

  // Every hold still believed held ends here: its owner is told (C20)
  // before the lock is let go, so that the work it guards can stop first.
  // Then what it held is released, with every release still pending (with
  // what is left of its keep, C21).
  std::vector<LossNotice> notices;
  std::vector<PendingReleases::Claim> to_release;
  {
    absl::MutexLock lock(&state_.mu);
    to_release =
        state_.holds.CloseAll(state_.ClosedError(),
                              absl::FailedPreconditionError(absl::StrCat(
                                  "the client of ", state_.endpoint,
                                  " closed before the release was confirmed")),
                              notices);
    for (PendingReleases::Claim& claim :
         state_.pending.TakeAll(state_.clock.Now())) {
      to_release.push_back(std::move(claim));
    }
  }
  notifier_.Deliver(notices);
  const MonoTime give_up = state_.clock.Now() + state_.options.close_timeout;
  CloseReleases outcome;
  ReleaseAtClose(to_release, give_up, outcome);
  {
    // Waits for calls still in flight on other threads; they end within
    // their timeouts, and blocking waits were cancelled above.
    absl::WriterMutexLock no_calls(&ops_mu_);
    // A final release in flight when Close() began, that failed, is
    // pending now: it gets what is left of the close's time.
    {
      absl::MutexLock lock(&state_.mu);
      to_release = state_.pending.TakeAll(state_.clock.Now());
    }
    ReleaseAtClose(to_release, give_up, outcome);
    state_.backend->Shutdown();
  }
  return outcome.Status(state_.endpoint);
}

absl::Status ClientCore::CloseReleases::Status(
    absl::string_view endpoint) const {
  if (failed == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "closing the client of ", endpoint, ": ", failed, " of ", sent,
      " locks were not released and will expire with their lease",
      first_error.ok() ? "" : absl::StrCat(" (", first_error.message(), ")")));
}

void ClientCore::ReleaseAtClose(
    const std::vector<PendingReleases::Claim>& to_release, MonoTime give_up,
    CloseReleases& outcome) {
  int& failed = outcome.failed;
  absl::Status& first_error = outcome.first_error;
  outcome.sent += static_cast<int>(to_release.size());
  for (const PendingReleases::Claim& claim : to_release) {
    if (state_.clock.Now() >= give_up) {
      ++failed;
      continue;
    }
    absl::Status left;
    // A failover met here is ridden out while the release can still free
    // the lock sooner than its lease would.
    state_.SendRelease(claim, ReleaseFailureEvent::Stage::kClose, &left,
                       std::min(give_up, claim.release.give_up));
    if (!left.ok() && !IsGone(left)) {
      if (failed++ == 0) first_error = left;
    }
  }
}

}  // namespace dlock::internal
