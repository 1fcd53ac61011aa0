// The client core's reports to its observer (dlock/observer.h) that wrap a
// call of service code: acquisitions, releases and what they found. The
// background's own reports are where they happen, in
// client_core_background.cc.
#include "client_core.h"
#include "lease_policy.h"

namespace dlock::internal {

absl::StatusOr<::dlock::Hold> ClientCore::Acquire(
    absl::string_view name, const AcquireOptions& options) {
  absl::StatusOr<std::string> owner = ResolveOwner(options.owner_token);
  bool fresh = false;
  if (!observer_) {
    if (!owner.ok()) return owner.status();
    return AcquireHold(name, options, *owner, fresh);
  }
  const MonoTime start = clock_.Now();
  const absl::string_view owner_id =
      owner.ok() ? absl::string_view(*owner) : absl::string_view();
  observer_.Tell(&LockObserver::OnAcquireAttempt,
                 AcquireAttemptEvent{.lock_namespace = lock_namespace_,
                                     .name = name,
                                     .owner = owner_id,
                                     .wait = options.wait});
  absl::StatusOr<::dlock::Hold> hold =
      owner.ok() ? AcquireHold(name, options, *owner, fresh)
                 : absl::StatusOr<::dlock::Hold>(owner.status());
  const absl::Duration waited = clock_.Now() - start;
  if (hold.ok()) {
    observer_.Tell(&LockObserver::OnGrant,
                   GrantEvent{.lock_namespace = lock_namespace_,
                              .name = name,
                              .owner = owner_id,
                              .fencing_token = hold->fencing_token(),
                              .hold_count = hold->hold_count(),
                              .fresh = fresh,
                              .waited = waited});
  } else {
    observer_.Tell(&LockObserver::OnAcquireFailed,
                   AcquireFailedEvent{.lock_namespace = lock_namespace_,
                                      .name = name,
                                      .waited = waited,
                                      .error = hold.status()});
  }
  return hold;
}

absl::Status ClientCore::KeepUntilLeaseEnd(const HoldRef& ref) {
  ReleaseReport report;
  absl::Status kept = KeepAcquisition(ref, report);
  if (observer_ && report.tell) TellRelease(ref, report, /*kept=*/true);
  return kept;
}

void ClientCore::TellRelease(const HoldRef& ref, const ReleaseReport& report,
                             bool kept) const {
  observer_.Tell(&LockObserver::OnRelease,
                 ReleaseEvent{.lock_namespace = lock_namespace_,
                              .name = ref.name,
                              .owner = ref.owner,
                              .fencing_token = report.fencing_token,
                              .held = clock_.Now() - report.granted,
                              .last = report.last,
                              .result = report.result,
                              .kept_until_lease_end = kept});
}

void ClientCore::TellReleaseFailure(const HoldKey& key,
                                    ReleaseFailureEvent::Stage stage,
                                    const absl::Status& error) const {
  if (!observer_ || error.ok() || IsGone(error)) return;
  observer_.Tell(&LockObserver::OnReleaseFailure,
                 ReleaseFailureEvent{.lock_namespace = lock_namespace_,
                                     .name = key.first,
                                     .owner = key.second,
                                     .stage = stage,
                                     .error = error});
}

}  // namespace dlock::internal
