#include "dlock/adapters/std_mutex.h"

#include <utility>

namespace dlock {

DistributedMutex::DistributedMutex(std::unique_ptr<DistributedLock> lock,
                                   MutexOptions options)
    : lock_(std::move(lock)), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<DistributedMutex>> DistributedMutex::Create(
    LockClient& client, absl::string_view name, MutexOptions options) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = client.GetLock(name);
  if (!lock.ok()) return lock.status();
  return std::make_unique<DistributedMutex>(*std::move(lock),
                                            std::move(options));
}

AcquireOptions DistributedMutex::MakeAcquireOptions(absl::Duration wait) const {
  AcquireOptions acquire;
  acquire.wait = wait;
  acquire.lease = options_.lease;
  acquire.owner_token = options_.owner_token;
  acquire.on_lost = options_.on_lost;
  return acquire;
}

void DistributedMutex::lock() {
  absl::StatusOr<Acquired> acquired =
      lock_->Acquire(MakeAcquireOptions(options_.lock_wait));
  if (!acquired.ok()) {
    throw MakeSystemError(acquired.status(), "dlock: lock() failed");
  }
}

bool DistributedMutex::try_lock() { return TryLockFor(absl::ZeroDuration()); }

bool DistributedMutex::TryLockFor(absl::Duration wait) {
  absl::StatusOr<Acquired> acquired = lock_->Acquire(MakeAcquireOptions(wait));
  if (acquired.ok()) return true;
  // "Held by another owner until the wait ran out" is the false of try_lock;
  // anything else (unreachable, closed client) must not look like contention.
  if (acquired.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return false;
  }
  throw MakeSystemError(acquired.status(), "dlock: try_lock() failed");
}

void DistributedMutex::unlock() noexcept {
  absl::Status released = lock_->Release(options_.owner_token);
  if (!released.ok()) {
    ReportReleaseError(options_.on_release_error, lock_->name(), released);
  }
}

absl::StatusOr<uint64_t> DistributedMutex::fencing_token() const {
  return lock_->FencingToken(options_.owner_token);
}

LockState DistributedMutex::state() const {
  return lock_->State(options_.owner_token);
}

}  // namespace dlock
