// Copyright dlock authors. An RAII hold of a distributed lock that work can
// watch: the fencing token to pass on, the lost state, and a CancelToken that
// fires when the lock is lost.
#ifndef DLOCK_ADAPTERS_LOCK_GUARD_H_
#define DLOCK_ADAPTERS_LOCK_GUARD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/adapters/errors.h"
#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/lock.h"

namespace dlock {

struct GuardOptions {
  // How long to wait for the lock; zero is one attempt.
  absl::Duration wait = absl::InfiniteDuration();
  // Unset: renewed by the watchdog until the guard ends (C7).
  std::optional<absl::Duration> lease;
  std::string owner_token;  // empty: this client plus this thread (C6)
  CancelToken cancel;       // cancels the wait
  // Where the destructor reports a failed release. Empty: the default hook.
  ReleaseErrorHook on_release_error;
  // Also told when the hold is lost, on the watchdog's thread.
  LockLostCallback on_lost;
};

// Holds one acquisition until destroyed or Release()d. Movable, not
// copyable. Nothing here throws; the destructor never throws.
//
// Lost detection: a watchdog-renewed hold (no lease given) is reported lost
// by the client as soon as it learns so, and the guard's cancel_token() fires
// then. A hold with an explicit lease is not renewed, so nobody is told when
// it runs out; lost() notices (and fires the token) when it is asked.
class LockGuard {
 public:
  // `lock` must outlive the guard.
  static absl::StatusOr<LockGuard> Acquire(DistributedLock& lock,
                                           GuardOptions options = {});
  // Owns a handle it gets from `client`; InvalidArgument for a bad name.
  static absl::StatusOr<LockGuard> Acquire(LockClient& client,
                                           absl::string_view name,
                                           GuardOptions options = {});

  LockGuard(LockGuard&& other) noexcept;
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  // Releases, reporting a failure to the release-error hook.
  ~LockGuard();

  // Releases now and says how it went; the destructor then does nothing.
  // FailedPrecondition when the hold was lost before.
  absl::Status Release();

  uint64_t fencing_token() const { return fencing_token_; }
  const std::string& name() const;
  // Whether the hold is known to be lost. Asks the client's local view (no
  // round trip), so it also notices an explicit lease that ran out.
  bool lost() const;
  // Why it was lost; OK while it is not.
  absl::Status lost_reason() const;
  // Fires when the hold is lost (see above). Work can poll it or register a
  // callback (ScopedCancelCallback) to stop touching the resource.
  const CancelToken& cancel_token() const;
  // False after Release() or a move.
  bool active() const { return lock_ != nullptr; }

 private:
  struct Shared;

  LockGuard(DistributedLock* lock, std::unique_ptr<DistributedLock> owned,
            GuardOptions options, uint64_t fencing_token,
            std::shared_ptr<Shared> shared);
  void ReleaseOrReport() noexcept;

  DistributedLock* lock_ = nullptr;
  std::unique_ptr<DistributedLock> owned_;
  std::string owner_token_;
  ReleaseErrorHook on_release_error_;
  uint64_t fencing_token_ = 0;
  // Shared with the on_lost callback, which may run on the watchdog's thread
  // after this guard is gone.
  std::shared_ptr<Shared> shared_;
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_LOCK_GUARD_H_
