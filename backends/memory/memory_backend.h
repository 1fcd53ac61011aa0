// Copyright dlock authors. memory://[name]: the reference implementation of
// the contract, in process. Every client in the process that names the same
// instance shares its locks, as clients of one server would; the process
// clock is the backend's clock. Locks' writers are in memory_backend.cc;
// semaphores, readers and elections (issue 24) in memory_primitives.cc.
#ifndef DLOCK_BACKENDS_MEMORY_MEMORY_BACKEND_H_
#define DLOCK_BACKENDS_MEMORY_MEMORY_BACKEND_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "memory_instance.h"

namespace dlock::memory {

class MemoryBackend : public Backend {
 public:
  MemoryBackend(std::shared_ptr<MemoryInstance> instance, std::string ns,
                absl::Duration fallback_poll);

  BackendTraits Traits() const override;
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;
  absl::Status Renew(const RenewCall& call) override;
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override;
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;
  absl::Status ForceUnlock(absl::string_view name) override;
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override;
  void Shutdown() override {}

  // memory_multi.cc: every name in one step under the instance's mutex.
  absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel) override;

  // memory_primitives.cc
  absl::Status Proclaim(const ProclaimCall& call) override;
  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override;
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override;

 private:
  // --- A lock's writer (memory_backend.cc) ---
  std::string Key(absl::string_view name) const;
  absl::StatusOr<Attempt> TryLockOnce(const std::string& key,
                                      const AcquireCall& call)
      ABSL_LOCKS_EXCLUDED(instance_->mu);
  // Why `call` cannot take lock `key` now (a refusal with a hint, or an
  // error), or nullopt when it can.
  std::optional<absl::StatusOr<Attempt>> Refusal(const std::string& key,
                                                 const AcquireCall& call,
                                                 MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);
  // Takes lock `key` for `call`, which Refusal() let go on: a fresh hold or
  // a re-entry.
  Acquired TakeLock(const std::string& key, const AcquireCall& call,
                    MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);
  // The writer's side of a lock with readers (C23), under the instance's
  // mutex: UpgradeRefused for an owner that reads; a refusal (with the
  // writer's intent kept while it waits) while others read or another
  // writer's intent stands; nullopt when the writer may go on.
  std::optional<absl::StatusOr<Attempt>> MeetReaders(const AcquireCall& call,
                                                     MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);
  absl::StatusOr<int64_t> ReleaseLock(const ReleaseCall& call);
  absl::Status RenewLock(const RenewCall& call);
  static void Describe(const Entry& entry, MonoTime now, LockInfo& info);

  // --- Multi-locks (memory_multi.cc) ---
  // One attempt at every part: the index of the first part refused (and its
  // refusal), or the holds of all, taken together.
  absl::StatusOr<AllAttempt> TryAllOnce(absl::Span<const AcquireCall> parts)
      ABSL_LOCKS_EXCLUDED(instance_->mu);

  // --- Semaphores, readers, elections (memory_primitives.cc) ---
  // The key of an object of `shape` (a kind letter after "\x1f").
  std::string ObjectKey(const HoldShape& shape, absl::string_view name) const;
  // The name its waiters and watchers wait on in the hub: a lock's readers
  // and writers share the lock's name.
  static std::string HubName(const HoldShape& shape, absl::string_view name);
  absl::StatusOr<Grant> AcquireShaped(const AcquireCall& call);
  absl::StatusOr<Attempt> TryShapedOnce(const std::string& key,
                                        const AcquireCall& call,
                                        std::vector<int64_t>& slots);
  absl::StatusOr<Attempt> TakePermits(Holders& object, const AcquireCall& call,
                                      MonoTime now, std::vector<int64_t>& slots)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);
  absl::StatusOr<Attempt> TakeRead(Holders& readers, const AcquireCall& call,
                                   MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);
  // A waiter that gave up leaves nothing behind (C9): its kept place goes,
  // announced so that the next waiter looks again.
  void GiveUpPlace(const std::string& key, const AcquireCall& call);
  absl::StatusOr<int64_t> ReleaseHolder(const ReleaseCall& call);
  absl::Status RenewHolder(const RenewCall& call);
  ObjectInfo DescribeObject(ObjectKind kind, absl::string_view name,
                            MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(instance_->mu);

  const Clock& clock_;
  const std::shared_ptr<MemoryInstance> instance_;
  WakeupHub& releases_;  // of this namespace, owned by instance_
  const std::string prefix_;
  const absl::Duration fallback_poll_;
};

}  // namespace dlock::memory

#endif  // DLOCK_BACKENDS_MEMORY_MEMORY_BACKEND_H_
