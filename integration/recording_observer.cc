#include "recording_observer.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock::test {

void RecordingObserver::Record(ObservedEvent event) {
  event.text = absl::StrCat(
      event.kind, " ns=", event.lock_namespace, " name=", event.name,
      " owner=", event.owner, " token=", event.fencing_token,
      " count=", event.hold_count, " flag=", event.flag,
      " kept=", event.kept_until_lease_end,
      " duration=", absl::FormatDuration(event.duration),
      " status=", event.status.ToString(),
      " cause=", LossCauseName(event.cause),
      " stage=", ReleaseFailureStageName(event.stage),
      " op=", BackendOperationName(event.operation), " calls=", event.calls);
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

void RecordingObserver::OnAcquireAttempt(const AcquireAttemptEvent& e) {
  Record({.kind = ObservedEvent::kAttempt,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .duration = e.wait,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnGrant(const GrantEvent& e) {
  Record({.kind = ObservedEvent::kGrant,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .fencing_token = e.fencing_token,
          .hold_count = e.hold_count,
          .flag = e.fresh,
          .duration = e.waited,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnAcquireFailed(const AcquireFailedEvent& e) {
  Record({.kind = ObservedEvent::kAcquireFailed,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .duration = e.waited,
          .status = e.error,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnRelease(const ReleaseEvent& e) {
  Record({.kind = ObservedEvent::kRelease,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .fencing_token = e.fencing_token,
          .flag = e.last,
          .kept_until_lease_end = e.kept_until_lease_end,
          .duration = e.held,
          .status = e.result,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnRenewal(const RenewalEvent& e) {
  Record({.kind = ObservedEvent::kRenewal,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .fencing_token = e.fencing_token,
          .flag = e.by_watchdog,
          .status = e.result,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnLoss(const LossEvent& e) {
  Record({.kind = ObservedEvent::kLoss,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .fencing_token = e.fencing_token,
          .duration = e.held,
          .status = e.reason,
          .cause = e.cause,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnReleaseFailure(const ReleaseFailureEvent& e) {
  Record({.kind = ObservedEvent::kReleaseFailure,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .owner = std::string(e.owner),
          .status = e.error,
          .stage = e.stage,
          .object_kind = e.kind,
          .shared = e.shared});
}

void RecordingObserver::OnBackendCall(const BackendCallEvent& e) {
  Record({.kind = ObservedEvent::kBackendCall,
          .lock_namespace = std::string(e.lock_namespace),
          .name = std::string(e.name),
          .duration = e.latency,
          .status = absl::Status(e.code, e.code == absl::StatusCode::kOk
                                             ? ""
                                             : "backend call failed"),
          .operation = e.operation,
          .calls = e.calls});
}

std::vector<ObservedEvent> RecordingObserver::Events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

std::vector<ObservedEvent> RecordingObserver::Of(
    ObservedEvent::Kind kind) const {
  std::vector<ObservedEvent> out;
  absl::MutexLock lock(&mu_);
  for (const ObservedEvent& e : events_) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

bool RecordingObserver::WaitFor(ObservedEvent::Kind kind, int count,
                                absl::Duration timeout) const {
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int n = 0;
    for (const ObservedEvent& e : events_) n += e.kind == kind;
    return n >= count;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::string RecordingObserver::AllText() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const ObservedEvent& e : events_) absl::StrAppend(&out, e.text, "\n");
  return out;
}

}  // namespace dlock::test
