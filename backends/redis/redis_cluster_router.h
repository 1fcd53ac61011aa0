// Copyright dlock authors. redis-cluster://: a slot map over the cluster's
// masters, each the one-master machinery of redis_master.h (a pipelined
// connection, its scripts), and a sharded subscription on each for the
// waiters' wake-ups (redis_shard_subscriber.h).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_CLUSTER_ROUTER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_CLUSTER_ROUTER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/backend/wakeup.h"
#include "redis_connection.h"
#include "redis_lock_ops.h"
#include "redis_router.h"

namespace dlock::redis {

// One range of slots and the master that serves it (CLUSTER SLOTS). An
// empty host means the node that answered.
struct SlotRange {
  int first = 0;
  int last = 0;
  Address master;
};
absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(
    const redisReply* reply, absl::string_view endpoint);

// Routes each lock's calls to the master of its slot: the map is read from
// the seeds (then from the masters it names) at Start() and again, at most
// every 100 ms, when a node answers MOVED, CLUSTERDOWN or cannot be
// reached; MOVED also moves the slot at once, ASK sends the call once to
// the slot's target with ASKING. `seeds` carry the credentials, timeouts
// and TLS every node is dialed with.
std::unique_ptr<Router> ClusterRouter(std::vector<ConnectionConfig> seeds,
                                      const Keyspace& keys, WakeupHub* hub);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_CLUSTER_ROUTER_H_
