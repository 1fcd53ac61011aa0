// Copyright dlock authors. How the core calls a LockObserver
// (dlock/observer.h): only when one is set, and never letting its exception
// reach the client.
#ifndef DLOCK_CORE_SRC_OBSERVER_CALLS_H_
#define DLOCK_CORE_SRC_OBSERVER_CALLS_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "dlock/backend/forwarding_backend.h"
#include "dlock/clock.h"
#include "dlock/observer.h"

namespace dlock::internal {

class ObserverCalls {
 public:
  ObserverCalls(std::shared_ptr<LockObserver> observer,
                std::string lock_namespace)
      : observer_(std::move(observer)),
        lock_namespace_(std::move(lock_namespace)) {}

  // The one check the core makes per event.
  explicit operator bool() const { return observer_ != nullptr; }
  const std::string& lock_namespace() const { return lock_namespace_; }

  // Calls `method` with `event`; an exception drops the event (the first
  // one is written to stderr).
  template <typename Event>
  void Tell(void (LockObserver::*method)(const Event&),
            const Event& event) const noexcept {
    try {
      (observer_.get()->*method)(event);
    } catch (const std::exception& e) {
      ReportThrow(e.what());
    } catch (...) {
      ReportThrow("an exception that is not a std::exception");
    }
  }

 private:
  void ReportThrow(const char* what) const noexcept;

  const std::shared_ptr<LockObserver> observer_;
  const std::string lock_namespace_;
  mutable std::atomic<bool> reported_{false};
};

// Times every call to the backend for the observer: installed by Connect()
// around the (decorated) backend only when an observer is set.
class TimedBackend : public ForwardingBackend {
 public:
  TimedBackend(std::unique_ptr<Backend> target, const ObserverCalls& observer,
               const Clock& clock)
      : ForwardingBackend(std::move(target)),
        observer_(observer),
        clock_(clock) {}

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;
  absl::Status Renew(const RenewCall& call) override;
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override;
  absl::Status RenewLiveness(absl::Duration ttl) override;
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override;
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;
  absl::Status ForceUnlock(absl::string_view name) override;
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override;
  absl::StatusOr<ServerMemory> ServerMemoryUse() override;

 private:
  void Tell(BackendOperation operation, absl::string_view name, int calls,
            MonoTime start, absl::StatusCode code) const;

  const ObserverCalls& observer_;  // the client core's, which outlives this
  const Clock& clock_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_OBSERVER_CALLS_H_
