#include "core_state.h"

#include <algorithm>

#include "dlock/backoff.h"
#include "dlock/ride_out.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

CoreState::CoreState(ClientOptions client_options, std::string ns,
                     std::string redacted_endpoint)
    : options(std::move(client_options)),
      clock_owner(options.clock),
      clock(clock_owner != nullptr ? *clock_owner : Clock::Real()),
      lock_namespace(std::move(ns)),
      endpoint(std::move(redacted_endpoint)),
      observer(options.observer, lock_namespace),
      wake_lateness(WakeLateness::For(clock)),
      alarms(clock),
      pending(clock, alarms),
      holds(
          clock,
          [this](const HoldKeyView& key, const HoldRecord* record) {
            return backend->HeldUntil(ObjectNameOf(key.first), key.second,
                                      record);
          },
          pending, alarms) {}

PendingReleases::Settled CoreState::SendRelease(
    const PendingReleases::Claim& claim, ReleaseFailureEvent::Stage stage,
    absl::Status* result, MonoTime ride_until) {
  const MonoTime sent = clock.Now();
  absl::StatusOr<int64_t> left =
      ride_until == MonoTime::InfinitePast()
          ? backend->Release(PendingReleases::CallFor(claim, sent))
          : ReleaseRidingOut(claim, ride_until);
  TellReleaseFailure(claim.key, stage, left.status());
  if (result != nullptr) *result = left.status();
  absl::MutexLock lock(&mu);
  const PendingReleases::Settled settled =
      pending.Settle(claim.key, left.status(), sent);
  if (settled == PendingReleases::Settled::kDone) {
    holds.ReleaseConfirmed(claim.release.generations);
  }
  return settled;
}

absl::StatusOr<int64_t> CoreState::ReleaseRidingOut(
    const PendingReleases::Claim& claim, MonoTime until) const {
  // A release that meets a failover can still free the lock before its
  // lease would; after `until` (the close deadline, or the lease's end, when
  // nothing is left to release) it is given up. Paced in real time: Close()
  // comes at the end, when nothing moves an injected clock any more.
  const Clock& real = Clock::Real();
  const MonoTime real_until = real.Now() + (until - clock.Now());
  RetryBackoff backoff;
  while (true) {
    absl::StatusOr<int64_t> left =
        backend->Release(PendingReleases::CallFor(claim, clock.Now()));
    const MonoTime now = real.Now();
    if (left.ok() || !IsTransient(left.status()) || now >= real_until) {
      return left;
    }
    real.SleepUntil(std::min(real_until, now + backoff.Next()));
  }
}

void CoreState::TellReleaseFailure(const HoldKeyView& key,
                                   ReleaseFailureEvent::Stage stage,
                                   const absl::Status& error) const {
  if (!observer || error.ok() || IsGone(error)) return;
  observer.Tell(&LockObserver::OnReleaseFailure,
                ReleaseFailureEvent{
                    .lock_namespace = lock_namespace,
                    .name = ObjectNameOf(key.first),
                    .owner = key.second,
                    .stage = stage,
                    .error = error,
                    .kind = ShapeOf(key.first).kind,
                    .shared = ShapeOf(key.first).mode == HoldMode::kShared});
}

}  // namespace dlock::internal
