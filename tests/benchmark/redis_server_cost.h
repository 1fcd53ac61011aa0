// What an uncontended acquire + release costs a Redis server (execution
// time by INFO commandstats), for dlock and for what it is measured
// against: node redis-semaphore's commands, two floors that take a number
// from the server without keeping it, and a design that keeps it without
// a script (docs/performance.md, "The fenced floor, measured").
#ifndef DLOCK_TESTS_BENCHMARK_REDIS_SERVER_COST_H_
#define DLOCK_TESTS_BENCHMARK_REDIS_SERVER_COST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock::bench {

// One command on a fresh connection to 127.0.0.1:`port`; its reply as text
// (a status, a bulk string or an integer).
absl::StatusOr<std::string> RedisCommandText(
    int port, const std::vector<std::string>& argv);

// Server µs per pair, 16 threads on a connection each, medians over
// alternating slices.
struct ServerCost {
  double dlock = 0;
  // SET NX PX, then a script of GET, compare, DEL.
  double peer = 0;
  // The same release after a script of TIME and SET NX PX: the number is
  // not kept in the lock.
  double time_script = 0;
  // The same release after MULTI, TIME, SET NX PX, EXEC: no script, and
  // the number is not kept in the lock either.
  double time_transaction = 0;
  // MULTI, HINCRBY of a template hash's counter, HSET of a hold's fields
  // (owner, holds, lease, liveness, waited), COPY of it to the lock (only
  // if the lock is absent), PEXPIRE NX, EXEC: no script, and the number is
  // in the lock. Released by a script of HGET of the owner, compare, DEL.
  double copy_transaction = 0;
};
absl::StatusOr<ServerCost> ServerCostOf(int port, const std::string& uri,
                                        absl::Duration slice, int rounds);

}  // namespace dlock::bench

#endif  // DLOCK_TESTS_BENCHMARK_REDIS_SERVER_COST_H_
