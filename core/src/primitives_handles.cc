// The semaphore and read-write lock handles: names bound to the client
// core, whose grants are holds of a shape (backend.h's HoldShape), keyed by
// qualified names in the core's tables (qualified_name.h).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "primitives.h"
#include "qualified_name.h"

namespace dlock::internal {
namespace {

class SemaphoreHandle : public Semaphore {
 public:
  SemaphoreHandle(std::shared_ptr<ClientCore> core, std::string name,
                  int64_t limit)
      : core_(std::move(core)),
        name_(std::move(name)),
        key_(QualifiedName(name_, Shape(1))),
        limit_(limit) {}

  const std::string& name() const override { return name_; }
  int64_t limit() const override { return limit_; }

  absl::StatusOr<Permit> Acquire(int64_t permits,
                                 const AcquireOptions& options) override {
    if (permits < 1 || permits > limit_) {
      return absl::InvalidArgumentError(
          absl::StrCat("semaphore '", name_, "': permits must be from 1 to ",
                       limit_, " (its N), not ", permits));
    }
    std::vector<int64_t> slots;
    absl::StatusOr<Hold> hold = core_->Acquire(
        name_, options, HoldAsk{.shape = Shape(permits), .slots = &slots});
    if (!hold.ok()) return hold.status();
    return Permit(*std::move(hold), std::move(slots));
  }

  absl::StatusOr<ObjectInfo> Inspect() override {
    return core_->InspectObject(ObjectKind::kSemaphore, name_);
  }
  absl::Status ReleaseByToken(absl::string_view owner_token) override {
    return core_->ReleaseByToken(key_, owner_token);
  }
  absl::Status RenewByToken(absl::string_view owner_token,
                            std::optional<absl::Duration> lease) override {
    return core_->RenewByToken(key_, owner_token, lease);
  }
  LockState StateByToken(absl::string_view owner_token) const override {
    return core_->StateByToken(key_, owner_token);
  }

 private:
  HoldShape Shape(int64_t permits) const {
    return HoldShape{.kind = ObjectKind::kSemaphore,
                     .mode = HoldMode::kPermits,
                     .permits = permits,
                     .limit = limit_};
  }

  const std::shared_ptr<ClientCore> core_;
  const std::string name_;
  const std::string key_;  // the core's for this semaphore's grants
  const int64_t limit_;
};

constexpr HoldShape kReader{.kind = ObjectKind::kLock,
                            .mode = HoldMode::kShared};

class ReadWriteLockHandle : public ReadWriteLock {
 public:
  ReadWriteLockHandle(std::shared_ptr<ClientCore> core, std::string name)
      : core_(std::move(core)),
        name_(std::move(name)),
        read_key_(QualifiedName(name_, kReader)) {}

  const std::string& name() const override { return name_; }

  absl::StatusOr<Hold> AcquireRead(const AcquireOptions& options) override {
    return core_->Acquire(name_, options, HoldAsk{.shape = kReader});
  }

  absl::StatusOr<Hold> AcquireWrite(const AcquireOptions& options) override {
    // Known here without a round trip; the backend refuses it too, for an
    // owner token that reads through another client.
    absl::StatusOr<std::string> owner = core_->OwnerOf(options.owner_token);
    // A writer that also reads re-enters its write.
    if (owner.ok() && core_->Believes(read_key_, *owner) &&
        !core_->Believes(name_, *owner)) {
      return UpgradeRefusedError(name_);
    }
    return core_->Acquire(name_, options);
  }

  absl::StatusOr<ObjectInfo> Inspect() override {
    return core_->InspectObject(ObjectKind::kLock, name_);
  }
  absl::Status ReleaseReadByToken(absl::string_view owner_token) override {
    return core_->ReleaseByToken(read_key_, owner_token);
  }
  absl::Status RenewReadByToken(absl::string_view owner_token,
                                std::optional<absl::Duration> lease) override {
    return core_->RenewByToken(read_key_, owner_token, lease);
  }
  LockState ReadStateByToken(absl::string_view owner_token) const override {
    return core_->StateByToken(read_key_, owner_token);
  }

 private:
  const std::shared_ptr<ClientCore> core_;
  const std::string name_;
  const std::string read_key_;  // the core's for this lock's read holds
};

}  // namespace

std::unique_ptr<Semaphore> MakeSemaphore(std::shared_ptr<ClientCore> core,
                                         std::string name, int64_t limit) {
  return std::make_unique<SemaphoreHandle>(std::move(core), std::move(name),
                                           limit);
}

std::unique_ptr<ReadWriteLock> MakeReadWriteLock(
    std::shared_ptr<ClientCore> core, std::string name) {
  return std::make_unique<ReadWriteLockHandle>(std::move(core),
                                               std::move(name));
}

}  // namespace dlock::internal
