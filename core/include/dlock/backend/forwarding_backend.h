// Copyright dlock authors. A backend that forwards every call to another one:
// the base for decorators that observe or perturb a backend without knowing
// which it is (metrics, tracing, and in tests a fault-injecting backend).
// Override only what the decorator changes. ClientOptions::backend_decorator
// puts one between a client's core and the backend its URI names.
#ifndef DLOCK_BACKEND_FORWARDING_BACKEND_H_
#define DLOCK_BACKEND_FORWARDING_BACKEND_H_

#include <memory>
#include <utility>
#include <vector>

#include "dlock/backend/backend.h"

namespace dlock {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> target)
      : target_(std::move(target)) {}

  BackendTraits Traits() const override { return target_->Traits(); }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    return target_->Acquire(call);
  }
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    return target_->Release(call);
  }
  absl::Status Renew(const RenewCall& call) override {
    return target_->Renew(call);
  }
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    return target_->RenewMany(calls);
  }
  absl::Status RenewLiveness(absl::Duration ttl) override {
    return target_->RenewLiveness(ttl);
  }
  // Runs under the client's own lock: must not block (see backend.h).
  MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                     const HoldRecord* record) override {
    return target_->HeldUntil(name, owner, record);
  }
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    return target_->Inspect(name);
  }
  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
    return target_->List(prefix);
  }
  absl::Status ForceUnlock(absl::string_view name) override {
    return target_->ForceUnlock(name);
  }
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
    return target_->ForceUnlockIfToken(name, fencing_token);
  }
  absl::StatusOr<ServerMemory> ServerMemoryUse() override {
    return target_->ServerMemoryUse();
  }
  absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel) override {
    return target_->AcquireAll(parts, deadline, cancel);
  }
  absl::Status Proclaim(const ProclaimCall& call) override {
    return target_->Proclaim(call);
  }
  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override {
    return target_->WatchObject(kind, name);
  }
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override {
    return target_->InspectObject(kind, name);
  }
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override {
    return target_->ListObjects(kind, prefix);
  }
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override {
    return target_->ForceUnlockObject(kind, name, fencing_token);
  }
  void Shutdown() override { target_->Shutdown(); }

  Backend& target() const { return *target_; }

 private:
  const std::unique_ptr<Backend> target_;
};

}  // namespace dlock

#endif  // DLOCK_BACKEND_FORWARDING_BACKEND_H_
