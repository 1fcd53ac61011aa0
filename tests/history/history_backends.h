// Copyright dlock authors. The lock services the history checker runs
// against: the test registry's entries (integration/test_servers.h), each
// with a throwaway server started once per test binary, how a worker's URI
// reaches it through a proxy, and the server-side faults (kill -9 and
// restart, a stop across releases, terminated sessions).
#ifndef DLOCK_TESTS_HISTORY_HISTORY_BACKENDS_H_
#define DLOCK_TESTS_HISTORY_HISTORY_BACKENDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock::test {

struct WorkerUri {
  // Through 127.0.0.1:proxy_port; 0: to the server itself.
  int proxy_port = 0;
  // The registry's short_session_param: a 2 s ZooKeeper session (session
  // expiry, liveness), a 2 s PostgreSQL session grace.
  bool short_session = false;
  // More query parameters ("liveness_ttl=2s").
  std::string extra;
};

class HistoryBackend {
 public:
  virtual ~HistoryBackend() = default;
  // The server's port on 127.0.0.1 (stable across restarts).
  virtual int port() const = 0;
  // Worker `i`'s URI in namespace `ns`.
  virtual std::string Uri(const std::string& ns, int i,
                          const WorkerUri& options) const = 0;
  // SIGKILL to the server, and a start on the same port and data at once.
  virtual absl::Status KillAndRestart() = 0;
  // A clean stop, `down` of nothing, and a start on the same port and data.
  virtual absl::Status StopAndStart(absl::Duration down) = 0;
  // Ends, on the server, every session of worker `i` (PostgreSQL);
  // Unimplemented elsewhere.
  virtual absl::Status TerminateSessionsOf(int i);
  // A primary with a standby (postgres_replicated_*, redis_cluster: the
  // master of the lock's slot): SIGKILL to the primary, the standby
  // promoted; then a fresh standby of the new primary, for the next
  // failover. Unimplemented elsewhere.
  virtual absl::Status FailOver() = 0;
  virtual absl::Status RebuildStandby() = 0;
  // Redis Cluster: the lock's slot moved to another master, half-moved for
  // `half_moved` (clients meet ASK). Unimplemented elsewhere.
  virtual absl::Status MigrateSlot(absl::Duration half_moved) = 0;
  // How soon others must get the lock after its holder was killed: the
  // lease (C2), plus room for the waiters' next look.
  virtual absl::Duration KilledHolderBound(absl::Duration lease) const {
    return lease + absl::Milliseconds(1500);
  }
};

// The registry's labels of this build whose locks other processes share,
// variants included: redis, redis_aof, zookeeper, postgres_lease,
// postgres_session, postgres_replicated_lease, ...
std::vector<std::string> BuiltBackends();
// The backend's server, started on first use and kept for the binary's
// life. FailedPrecondition, saying what to install, if it cannot start.
absl::StatusOr<HistoryBackend*> SharedBackend(const std::string& name);

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_BACKENDS_H_
