#include "core_state.h"

#include "lease_policy.h"

namespace dlock::internal {

CoreState::CoreState(ClientOptions client_options, std::string ns,
                     std::string redacted_endpoint)
    : options(std::move(client_options)),
      clock_owner(options.clock),
      clock(clock_owner != nullptr ? *clock_owner : Clock::Real()),
      lock_namespace(std::move(ns)),
      endpoint(std::move(redacted_endpoint)),
      observer(options.observer, lock_namespace),
      alarms(clock),
      pending(clock, alarms),
      holds(
          clock,
          [this](const HoldKeyView& key, const HoldRecord* record) {
            return backend->HeldUntil(key.first, key.second, record);
          },
          pending, alarms) {}

PendingReleases::Settled CoreState::SendRelease(
    const PendingReleases::Claim& claim, ReleaseFailureEvent::Stage stage,
    absl::Status* result) {
  const MonoTime sent = clock.Now();
  absl::StatusOr<int64_t> left =
      backend->Release(PendingReleases::CallFor(claim, sent));
  TellReleaseFailure(claim.key, stage, left.status());
  if (result != nullptr) *result = left.status();
  absl::MutexLock lock(&mu);
  return pending.Settle(claim.key, left.status(), sent);
}

void CoreState::TellReleaseFailure(const HoldKeyView& key,
                                   ReleaseFailureEvent::Stage stage,
                                   const absl::Status& error) const {
  if (!observer || error.ok() || IsGone(error)) return;
  observer.Tell(&LockObserver::OnReleaseFailure,
                ReleaseFailureEvent{.lock_namespace = lock_namespace,
                                    .name = key.first,
                                    .owner = key.second,
                                    .stage = stage,
                                    .error = error});
}

}  // namespace dlock::internal
