// Copyright dlock authors. The backend of every Redis topology but Redlock:
// the lock operations as scripts, each on the master its Router finds (the
// one master, or the master of the lock's slot in a cluster), waiters woken
// by the router's subscriptions.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_BACKEND_H_
#define DLOCK_BACKENDS_REDIS_REDIS_BACKEND_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_lock_ops.h"
#include "redis_router.h"

namespace dlock::redis {

// Makes the router, given the hub its subscriptions wake waiters on.
using MakeRouter = std::function<std::unique_ptr<Router>(WakeupHub* hub)>;

// The backend over the router `make_router` makes, started (connected).
absl::StatusOr<std::unique_ptr<Backend>> StartRedisBackend(
    Keyspace keys, Liveness liveness, Replication replication,
    absl::Duration fallback_poll, const Clock& clock,
    const MakeRouter& make_router);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_BACKEND_H_
