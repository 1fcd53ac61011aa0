#include "fault_backend.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dlock::test {

// Puts a FaultPlan in front of one backend.
class FaultInjectingBackend : public ForwardingBackend {
 public:
  FaultInjectingBackend(std::unique_ptr<Backend> target,
                        std::shared_ptr<FaultPlan> plan)
      : ForwardingBackend(std::move(target)), plan_(std::move(plan)) {}

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    return Run<Grant>(FaultPlan::kAcquire,
                      [&] { return ForwardingBackend::Acquire(call); });
  }
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    return Run<int64_t>(FaultPlan::kRelease,
                        [&] { return ForwardingBackend::Release(call); });
  }
  absl::Status Renew(const RenewCall& call) override {
    return RunStatus(FaultPlan::kRenew,
                     [&] { return ForwardingBackend::Renew(call); });
  }
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    FaultPlan::Fault fault = plan_->Enter(FaultPlan::kRenew);
    if (fault.fail_before) {
      return std::vector<absl::Status>(calls.size(), Lost("renewal", false));
    }
    std::vector<absl::Status> results = ForwardingBackend::RenewMany(calls);
    AfterCall(fault);
    if (fault.fail_after) {
      return std::vector<absl::Status>(calls.size(), Lost("renewal", true));
    }
    return results;
  }
  BackendTraits Traits() const override {
    BackendTraits traits = ForwardingBackend::Traits();
    if (plan_->emulates_liveness()) traits.liveness_record = true;
    return traits;
  }
  absl::Status RenewLiveness(absl::Duration ttl) override {
    return RunStatus(FaultPlan::kLiveness, [&] {
      if (plan_->emulates_liveness() &&
          !ForwardingBackend::Traits().liveness_record) {
        return absl::OkStatus();
      }
      return ForwardingBackend::RenewLiveness(ttl);
    });
  }
  MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                     const HoldRecord* record) override {
    return std::min(plan_->held_until(),
                    ForwardingBackend::HeldUntil(name, owner, record));
  }
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    return Run<LockInfo>(FaultPlan::kInspect,
                         [&] { return ForwardingBackend::Inspect(name); });
  }
  absl::Status ForceUnlock(absl::string_view name) override {
    return RunStatus(FaultPlan::kForceUnlock,
                     [&] { return ForwardingBackend::ForceUnlock(name); });
  }
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
    return RunStatus(FaultPlan::kForceUnlock, [&] {
      return ForwardingBackend::ForceUnlockIfToken(name, fencing_token);
    });
  }

 private:
  static absl::Status Lost(absl::string_view what, bool ran) {
    return absl::UnavailableError(
        absl::StrCat("injected fault: the ", what,
                     ran ? "'s reply was lost (it ran on the backend)"
                         : " never reached the backend"));
  }

  static void AfterCall(const FaultPlan::Fault& fault) {
    if (fault.delay_after > absl::ZeroDuration()) {
      absl::SleepFor(fault.delay_after);
    }
    if (fault.after) fault.after();
  }

  template <typename T, typename Call>
  absl::StatusOr<T> Run(FaultPlan::Op op, Call call) {
    FaultPlan::Fault fault = plan_->Enter(op);
    if (fault.fail_before) return Lost("call", false);
    absl::StatusOr<T> result = call();
    AfterCall(fault);
    if (fault.fail_after) return Lost("call", true);
    return result;
  }

  template <typename Call>
  absl::Status RunStatus(FaultPlan::Op op, Call call) {
    return Run<bool>(op,
                     [&]() -> absl::StatusOr<bool> {
                       absl::Status s = call();
                       if (!s.ok()) return s;
                       return true;
                     })
        .status();
  }

  const std::shared_ptr<FaultPlan> plan_;
};

std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)>
FaultPlan::Decorator() {
  std::shared_ptr<FaultPlan> self = shared_from_this();
  return [self](std::unique_ptr<Backend> target) -> std::unique_ptr<Backend> {
    return std::make_unique<FaultInjectingBackend>(std::move(target), self);
  };
}

void FaultPlan::Set(Op op, Fault fault) {
  absl::MutexLock lock(&mu_);
  faults_[op] = std::move(fault);
}

void FaultPlan::EmulateLivenessRecord() {
  absl::MutexLock lock(&mu_);
  emulate_liveness_ = true;
}

bool FaultPlan::emulates_liveness() const {
  absl::MutexLock lock(&mu_);
  return emulate_liveness_;
}

void FaultPlan::SetHeldUntil(MonoTime until) {
  absl::MutexLock lock(&mu_);
  held_until_ = until;
}

MonoTime FaultPlan::held_until() const {
  absl::MutexLock lock(&mu_);
  return held_until_;
}

void FaultPlan::Unblock(Op op) {
  absl::MutexLock lock(&mu_);
  faults_[op].block = false;
  ++unblocks_[op];
}

int FaultPlan::calls(Op op) const {
  absl::MutexLock lock(&mu_);
  return calls_[op];
}

bool FaultPlan::WaitForCalls(Op op, int count, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return calls_[op] >= count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool FaultPlan::WaitForBlocked(Op op, int count, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return blocked_[op] >= count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

FaultPlan::Fault FaultPlan::Enter(Op op) {
  Fault fault;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[op];
    fault = faults_[op];
    if (faults_[op].times > 0 && --faults_[op].times == 0) faults_[op] = {};
    if (fault.block) {
      const uint64_t seen = unblocks_[op];
      ++blocked_[op];
      auto unblocked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return unblocks_[op] != seen;
      };
      mu_.Await(absl::Condition(&unblocked));
      --blocked_[op];
    }
  }
  if (fault.delay_before > absl::ZeroDuration()) {
    absl::SleepFor(fault.delay_before);
  }
  return fault;
}

}  // namespace dlock::test
