#include "dlock/adapters/std_mutex.h"

#include <utility>

#include "dlock/errors.h"

namespace dlock {
namespace {

std::unique_ptr<DistributedLock> LockOrThrow(LockClient& client,
                                             absl::string_view name) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = client.GetLock(name);
  if (!lock.ok()) {
    throw MakeSystemError(lock.status(), "dlock: DistributedMutex");
  }
  return *std::move(lock);
}

}  // namespace

DistributedMutex::DistributedMutex(LockClient& client, absl::string_view name,
                                   MutexOptions options)
    : DistributedMutex(LockOrThrow(client, name), std::move(options)) {}

DistributedMutex::DistributedMutex(std::unique_ptr<DistributedLock> lock,
                                   MutexOptions options)
    : lock_(std::move(lock)),
      options_(std::move(options)),
      holds_(/*shared_owner=*/!options_.owner_token.empty()) {}

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
  absl::StatusOr<Hold> hold =
      lock_->Acquire(MakeAcquireOptions(options_.lock_wait));
  if (!hold.ok()) {
    throw MakeSystemError(hold.status(), "dlock: lock() failed");
  }
  holds_.Push(*std::move(hold));
}

bool DistributedMutex::try_lock() { return TryLockFor(absl::ZeroDuration()); }

bool DistributedMutex::TryLockFor(absl::Duration wait) {
  absl::StatusOr<Hold> hold = lock_->Acquire(MakeAcquireOptions(wait));
  if (hold.ok()) {
    holds_.Push(*std::move(hold));
    return true;
  }
  // "Held by another owner until the wait ran out" is the false of try_lock;
  // anything else (unreachable, closed client) must not look like contention.
  if (hold.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return false;
  }
  throw MakeSystemError(hold.status(), "dlock: try_lock() failed");
}

void DistributedMutex::unlock() noexcept {
  Hold innermost = holds_.Pop();
  // Released outside the stacks' lock: the release is a round trip, and other
  // threads' lock() and unlock() need not wait for it.
  absl::Status released =
      innermost.active()
          ? innermost.Release()
          : WithContext(NotOwnerError(lock_->name()),
                        "unlock() without a lock() of this owner");
  // Close() ended the hold already, and told if it was believed (C13).
  if (!released.ok() && !IsClientClosed(released)) {
    ReportReleaseError(options_.on_release_error, lock_->name(), released);
  }
}

absl::StatusOr<uint64_t> DistributedMutex::fencing_token() const {
  return holds_.FencingToken(lock_->name());
}

LockState DistributedMutex::state() const { return holds_.State(); }

}  // namespace dlock
