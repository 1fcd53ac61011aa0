#include "dlock/adapters/lock_guard.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace dlock {

struct LockGuard::Shared {
  CancelToken lost;
  absl::Mutex mu;
  absl::Status reason ABSL_GUARDED_BY(mu);

  void RecordReason(absl::Status why) {
    absl::MutexLock lock(&mu);
    if (reason.ok()) reason = std::move(why);
  }
  void MarkLost(absl::Status why) {
    RecordReason(std::move(why));
    lost.Cancel();
  }
};

absl::StatusOr<LockGuard> LockGuard::Acquire(DistributedLock& lock,
                                             GuardOptions options) {
  auto shared = std::make_shared<Shared>();
  AcquireOptions acquire;
  acquire.wait = options.wait;
  acquire.lease = options.lease;
  acquire.owner_token = options.owner_token;
  acquire.cancel = options.cancel;
  acquire.on_lost = [shared, user = options.on_lost](const LockLostEvent& e) {
    // The user's callback runs before the token fires: work that stops on
    // the token finds everything the callback did already done.
    shared->RecordReason(e.reason.ok() ? absl::FailedPreconditionError("lost")
                                       : e.reason);
    if (user) user(e);
    shared->lost.Cancel();
  };
  absl::StatusOr<Acquired> acquired = lock.Acquire(acquire);
  if (!acquired.ok()) return acquired.status();
  return LockGuard(&lock, nullptr, std::move(options), acquired->fencing_token,
                   std::move(shared));
}

absl::StatusOr<LockGuard> LockGuard::Acquire(LockClient& client,
                                             absl::string_view name,
                                             GuardOptions options) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = client.GetLock(name);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<LockGuard> guard = Acquire(**lock, std::move(options));
  if (!guard.ok()) return guard.status();
  guard->owned_ = *std::move(lock);
  return guard;
}

LockGuard::LockGuard(DistributedLock* lock,
                     std::unique_ptr<DistributedLock> owned,
                     GuardOptions options, uint64_t fencing_token,
                     std::shared_ptr<Shared> shared)
    : lock_(lock),
      owned_(std::move(owned)),
      owner_token_(std::move(options.owner_token)),
      on_release_error_(std::move(options.on_release_error)),
      fencing_token_(fencing_token),
      shared_(std::move(shared)) {}

LockGuard::LockGuard(LockGuard&& other) noexcept
    : lock_(std::exchange(other.lock_, nullptr)),
      owned_(std::move(other.owned_)),
      owner_token_(std::move(other.owner_token_)),
      on_release_error_(std::move(other.on_release_error_)),
      fencing_token_(other.fencing_token_),
      shared_(other.shared_) {}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    ReleaseOrReport();
    lock_ = std::exchange(other.lock_, nullptr);
    owned_ = std::move(other.owned_);
    owner_token_ = std::move(other.owner_token_);
    on_release_error_ = std::move(other.on_release_error_);
    fencing_token_ = other.fencing_token_;
    shared_ = other.shared_;
  }
  return *this;
}

LockGuard::~LockGuard() { ReleaseOrReport(); }

void LockGuard::ReleaseOrReport() noexcept {
  if (lock_ == nullptr) return;
  const std::string name = lock_->name();
  absl::Status released = Release();
  if (!released.ok()) {
    ReportReleaseError(on_release_error_, name, released);
  }
}

absl::Status LockGuard::Release() {
  if (lock_ == nullptr) {
    return absl::FailedPreconditionError("the guard holds no lock");
  }
  DistributedLock* lock = std::exchange(lock_, nullptr);
  absl::Status released = lock->Release(owner_token_);
  owned_.reset();
  return released;
}

const std::string& LockGuard::name() const {
  static const std::string* none = new std::string;
  return lock_ != nullptr ? lock_->name() : *none;
}

bool LockGuard::lost() const {
  if (shared_ == nullptr) return false;
  if (shared_->lost.IsCancelled()) return true;
  if (lock_ != nullptr && lock_->State(owner_token_) == LockState::kLost) {
    shared_->MarkLost(absl::FailedPreconditionError(
        absl::StrCat("lease of lock '", lock_->name(), "' ran out")));
    return true;
  }
  return false;
}

absl::Status LockGuard::lost_reason() const {
  if (!lost()) return absl::OkStatus();
  absl::MutexLock lock(&shared_->mu);
  return shared_->reason;
}

const CancelToken& LockGuard::cancel_token() const {
  static const CancelToken* never = new CancelToken;
  return shared_ != nullptr ? shared_->lost : *never;
}

}  // namespace dlock
