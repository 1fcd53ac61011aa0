// Copyright dlock authors. A LockObserver (dlock/observer.h) for tests that
// keeps every event it is told, as values, and lets a test wait for them.
#ifndef DLOCK_INTEGRATION_RECORDING_OBSERVER_H_
#define DLOCK_INTEGRATION_RECORDING_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/observer.h"

namespace dlock::test {

struct ObservedEvent {
  enum Kind {
    kAttempt,
    kGrant,
    kAcquireFailed,
    kRelease,
    kRenewal,
    kLoss,
    kReleaseFailure,
    kBackendCall,
  };
  Kind kind = kAttempt;
  std::string lock_namespace;
  std::string name;
  std::string owner;
  uint64_t fencing_token = 0;
  int64_t hold_count = 0;
  // GrantEvent::fresh, ReleaseEvent::last, RenewalEvent::by_watchdog.
  bool flag = false;
  bool kept_until_lease_end = false;
  // The wait asked, waited, held or latency.
  absl::Duration duration;
  // The error, result or reason; a backend call's code.
  absl::Status status;
  LossCause cause = LossCause::kGone;
  ReleaseFailureEvent::Stage stage = ReleaseFailureEvent::Stage::kCaller;
  BackendOperation operation = BackendOperation::kAcquire;
  int calls = 0;
  // Every field as text, to search for what an event carries.
  std::string text;
  // Which hold (issue 24).
  ObjectKind object_kind = ObjectKind::kLock;
  bool shared = false;
};

class RecordingObserver : public LockObserver {
 public:
  void OnAcquireAttempt(const AcquireAttemptEvent& e) override;
  void OnGrant(const GrantEvent& e) override;
  void OnAcquireFailed(const AcquireFailedEvent& e) override;
  void OnRelease(const ReleaseEvent& e) override;
  void OnRenewal(const RenewalEvent& e) override;
  void OnLoss(const LossEvent& e) override;
  void OnReleaseFailure(const ReleaseFailureEvent& e) override;
  void OnBackendCall(const BackendCallEvent& e) override;

  std::vector<ObservedEvent> Events() const;
  // The events of one kind, oldest first.
  std::vector<ObservedEvent> Of(ObservedEvent::Kind kind) const;
  // Waits (real time) until `count` events of `kind` arrived.
  bool WaitFor(ObservedEvent::Kind kind, int count,
               absl::Duration timeout) const;
  // The text of every event, one a line.
  std::string AllText() const;

 private:
  void Record(ObservedEvent event);

  mutable absl::Mutex mu_;
  std::vector<ObservedEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_RECORDING_OBSERVER_H_
