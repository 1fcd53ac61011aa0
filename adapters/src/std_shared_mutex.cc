#include "dlock/adapters/std_shared_mutex.h"

#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"

namespace dlock {
namespace {

std::unique_ptr<ReadWriteLock> LockOrThrow(LockClient& client,
                                           absl::string_view name) {
  absl::StatusOr<std::unique_ptr<ReadWriteLock>> lock =
      client.GetReadWriteLock(name);
  if (!lock.ok()) {
    throw MakeSystemError(lock.status(), "dlock: DistributedSharedMutex");
  }
  return *std::move(lock);
}

}  // namespace

DistributedSharedMutex::DistributedSharedMutex(LockClient& client,
                                               absl::string_view name,
                                               MutexOptions options)
    : DistributedSharedMutex(LockOrThrow(client, name), std::move(options)) {}

DistributedSharedMutex::DistributedSharedMutex(
    std::unique_ptr<ReadWriteLock> lock, MutexOptions options)
    : lock_(std::move(lock)),
      options_(std::move(options)),
      write_holds_(/*shared_owner=*/!options_.owner_token.empty()),
      read_holds_(/*shared_owner=*/!options_.owner_token.empty()) {}

absl::StatusOr<std::unique_ptr<DistributedSharedMutex>>
DistributedSharedMutex::Create(LockClient& client, absl::string_view name,
                               MutexOptions options) {
  absl::StatusOr<std::unique_ptr<ReadWriteLock>> lock =
      client.GetReadWriteLock(name);
  if (!lock.ok()) return lock.status();
  return std::make_unique<DistributedSharedMutex>(*std::move(lock),
                                                  std::move(options));
}

absl::StatusOr<Hold> DistributedSharedMutex::Take(bool shared,
                                                  absl::Duration wait,
                                                  const char* context) {
  // Refused here, without a round trip, as the backend would refuse it
  // (kUpgradeRefused): what std::shared_mutex reports for a self-deadlock.
  if (!shared && read_holds_.CallerHolds()) {
    throw std::system_error(
        std::make_error_code(std::errc::resource_deadlock_would_occur),
        absl::StrCat(context, ": lock '", lock_->name(),
                     "' is held shared by this owner; unlock_shared() "
                     "before lock() (an upgrade could deadlock)"));
  }
  AcquireOptions acquire;
  acquire.wait = wait;
  acquire.lease = options_.lease;
  acquire.owner_token = options_.owner_token;
  acquire.on_lost = options_.on_lost;
  absl::StatusOr<Hold> hold =
      shared ? lock_->AcquireRead(acquire) : lock_->AcquireWrite(acquire);
  // "Held by another owner until the wait ran out" is the false of
  // try_lock; anything else must not look like contention.
  if (hold.ok() ||
      hold.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return hold;
  }
  if (IsUpgradeRefused(hold.status())) {
    throw std::system_error(
        std::make_error_code(std::errc::resource_deadlock_would_occur),
        absl::StrCat(context, ": ", hold.status().message()));
  }
  throw MakeSystemError(hold.status(), context);
}

void DistributedSharedMutex::lock() {
  absl::StatusOr<Hold> hold =
      Take(/*shared=*/false, options_.lock_wait, "dlock: lock() failed");
  if (!hold.ok()) throw MakeSystemError(hold.status(), "dlock: lock() failed");
  write_holds_.Push(*std::move(hold));
}

void DistributedSharedMutex::lock_shared() {
  absl::StatusOr<Hold> hold =
      Take(/*shared=*/true, options_.lock_wait, "dlock: lock_shared() failed");
  if (!hold.ok()) {
    throw MakeSystemError(hold.status(), "dlock: lock_shared() failed");
  }
  read_holds_.Push(*std::move(hold));
}

bool DistributedSharedMutex::try_lock() {
  return TryLockFor(/*shared=*/false, absl::ZeroDuration());
}

bool DistributedSharedMutex::try_lock_shared() {
  return TryLockFor(/*shared=*/true, absl::ZeroDuration());
}

bool DistributedSharedMutex::TryLockFor(bool shared, absl::Duration wait) {
  absl::StatusOr<Hold> hold = Take(
      shared, wait,
      shared ? "dlock: try_lock_shared() failed" : "dlock: try_lock() failed");
  if (!hold.ok()) return false;
  (shared ? read_holds_ : write_holds_).Push(*std::move(hold));
  return true;
}

void DistributedSharedMutex::Unlock(internal::HoldStacks& holds,
                                    const char* what) noexcept {
  Hold innermost = holds.Pop();
  absl::Status released =
      innermost.active()
          ? innermost.Release()
          : WithContext(NotOwnerError(lock_->name()),
                        absl::StrCat(what, " without a lock of this owner"));
  // Close() ended the hold already, and told if it was believed (C13).
  if (!released.ok() && !IsClientClosed(released)) {
    ReportReleaseError(options_.on_release_error, lock_->name(), released);
  }
}

void DistributedSharedMutex::unlock() noexcept {
  Unlock(write_holds_, "unlock()");
}

void DistributedSharedMutex::unlock_shared() noexcept {
  Unlock(read_holds_, "unlock_shared()");
}

absl::StatusOr<uint64_t> DistributedSharedMutex::fencing_token() const {
  return write_holds_.FencingToken(lock_->name());
}

absl::StatusOr<uint64_t> DistributedSharedMutex::shared_fencing_token() const {
  return read_holds_.FencingToken(lock_->name());
}

LockState DistributedSharedMutex::state() const { return write_holds_.State(); }

LockState DistributedSharedMutex::shared_state() const {
  return read_holds_.State();
}

}  // namespace dlock
