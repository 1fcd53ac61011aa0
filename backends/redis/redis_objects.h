// Copyright dlock authors. Semaphores and elections on every Redis
// topology but Redlock (issue 24; docs/redis.md; Redlock's elections are
// redlock_objects.cc's, over the same scripts): one hash of holders per
// object in the lock's slot, on the master the Router finds, waiters and
// watchers woken by the release channel's messages.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_OBJECTS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_OBJECTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_holds.h"
#include "redis_lock_ops.h"
#include "redis_router.h"

namespace dlock::redis {

// What the objects share with the backend's locks.
struct ObjectsContext {
  const Clock& clock;
  const Keyspace& keys;
  const Liveness& liveness;
  const Replication& replication;
  absl::Duration fallback_poll;
  Drift drift;
  WakeupHub& releases;
  Router& router;
  HeldLocks<RedisHold>& held;
};

// The Backend calls for HoldShapes other than a lock's writer, and the
// object-level admin calls; renewals and heartbeats go in the backend's
// batches (HolderRenewScript, HolderRefreshLivenessScript). Thread-safe.
class HolderObjects {
 public:
  explicit HolderObjects(ObjectsContext context) : c_(context) {}
  const ObjectsContext& context() const { return c_; }

  absl::StatusOr<Grant> Acquire(const AcquireCall& call);
  absl::StatusOr<int64_t> Release(const ReleaseCall& call);
  absl::Status Proclaim(const ProclaimCall& call);
  std::unique_ptr<ObjectWatch> Watch(ObjectKind kind, absl::string_view name);
  absl::StatusOr<ObjectInfo> Inspect(ObjectKind kind, absl::string_view name);
  absl::StatusOr<std::vector<ObjectInfo>> List(ObjectKind kind,
                                               absl::string_view prefix);
  absl::Status ForceUnlock(ObjectKind kind, absl::string_view name,
                           std::optional<uint64_t> fencing_token);

  // A lock's writer refused by acquire.lua with the lock held by nobody
  // (kept, or read-held: C23): write_acquire.lua's answer, replicated like
  // a grant; UpgradeRefusedError when the owner reads it. `intent_left`
  // says whether a writer's intent of the owner may remain after it.
  absl::StatusOr<Attempt> WriterMeetsReaders(const AcquireCall& call,
                                             bool will_wait, bool& intent_left);
  // The owner's writer intent goes (a wait given up, or ended by a grant
  // that did not take it along), waking the readers it held back.
  void DropIntent(absl::string_view name, absl::string_view owner);
  // A lock with its writer and its readers, read in one step (C11).
  absl::StatusOr<ObjectInfo> InspectLock(absl::string_view name);

 private:
  absl::StatusOr<Attempt> TryOnce(const AcquireCall& call, bool will_wait,
                                  std::vector<int64_t>& slots);
  absl::Duration LivenessTtl() const;  // zero: no liveness
  Routed RunOne(absl::string_view name,
                std::function<ScriptCall(const Master&)> build);

  const ObjectsContext c_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_OBJECTS_H_
