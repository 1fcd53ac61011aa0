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

std::vector<Hold>* DistributedMutex::StackOfCaller() {
  if (!options_.owner_token.empty()) return &by_token_;
  auto it = by_thread_.find(std::this_thread::get_id());
  return it == by_thread_.end() ? nullptr : &it->second;
}

const std::vector<Hold>* DistributedMutex::StackOfCaller() const {
  if (!options_.owner_token.empty()) return &by_token_;
  auto it = by_thread_.find(std::this_thread::get_id());
  return it == by_thread_.end() ? nullptr : &it->second;
}

void DistributedMutex::Push(Hold hold) {
  absl::MutexLock lock(&mu_);
  if (!options_.owner_token.empty()) {
    by_token_.push_back(std::move(hold));
  } else {
    by_thread_[std::this_thread::get_id()].push_back(std::move(hold));
  }
}

void DistributedMutex::lock() {
  absl::StatusOr<Hold> hold =
      lock_->Acquire(MakeAcquireOptions(options_.lock_wait));
  if (!hold.ok()) {
    throw MakeSystemError(hold.status(), "dlock: lock() failed");
  }
  Push(*std::move(hold));
}

bool DistributedMutex::try_lock() { return TryLockFor(absl::ZeroDuration()); }

bool DistributedMutex::TryLockFor(absl::Duration wait) {
  absl::StatusOr<Hold> hold = lock_->Acquire(MakeAcquireOptions(wait));
  if (hold.ok()) {
    Push(*std::move(hold));
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
  Hold innermost;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Hold>* stack = StackOfCaller();
    if (stack != nullptr && !stack->empty()) {
      innermost = std::move(stack->back());
      stack->pop_back();
      if (stack->empty() && options_.owner_token.empty()) {
        by_thread_.erase(std::this_thread::get_id());
      }
    }
  }
  // Released without mu_: the release is a round trip, and other threads'
  // lock() and unlock() need not wait for it.
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
  absl::MutexLock lock(&mu_);
  const std::vector<Hold>* stack = StackOfCaller();
  if (stack == nullptr || stack->empty()) {
    return WithContext(NotOwnerError(lock_->name()),
                       "this owner holds nothing through this mutex");
  }
  const Hold& current = stack->back();
  if (current.state() == LockState::kHeld) return current.fencing_token();
  absl::Status why = current.lost_reason();
  return why.ok() ? NotOwnerError(lock_->name()) : why;
}

LockState DistributedMutex::state() const {
  absl::MutexLock lock(&mu_);
  const std::vector<Hold>* stack = StackOfCaller();
  if (stack == nullptr || stack->empty()) return LockState::kNotHeld;
  return stack->back().state();
}

}  // namespace dlock
