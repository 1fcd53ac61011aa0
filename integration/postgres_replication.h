// Copyright dlock authors. A PostgreSQL primary and its streaming standby for
// failover tests: the standby is a base backup of the primary that streams
// through a FaultProxy (so that a test can cut replication), with or without
// synchronous replication. A failover is KillPrimary() then Promote();
// Rebuild() makes the dead primary a standby of the new one, on its old port,
// so that the pair can fail over again. Clients reach whichever is primary
// through Uri(): libpq's host list with target_session_attrs=read-write.
#ifndef DLOCK_INTEGRATION_POSTGRES_REPLICATION_H_
#define DLOCK_INTEGRATION_POSTGRES_REPLICATION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fault_proxy.h"
#include "postgres_server.h"

namespace dlock::test {

class PostgresReplication {
 public:
  struct Options {
    // synchronous_standby_names = '*' on the primary (synchronous_commit
    // stays on): a commit returns once the standby has flushed it.
    bool synchronous = true;
    PostgresServer::Options server;
  };

  static absl::StatusOr<std::unique_ptr<PostgresReplication>> Start(
      Options options);

  PostgresServer& primary() { return *servers_[primary_]; }
  PostgresServer& standby() { return *servers_[1 - primary_]; }
  // Between the standby and the primary: Partition() cuts replication.
  FaultProxy& link() { return link_; }
  bool synchronous() const { return synchronous_; }

  // postgres://postgres@127.0.0.1:<a>,127.0.0.1:<b>/postgres with
  // target_session_attrs=read-write, `namespace=ns` and `extra`. Both ports
  // stay the same across failovers.
  std::string Uri(const std::string& ns = "",
                  const std::string& extra = "") const;

  // synchronous_standby_names on the primary ('*' or none), reloaded; when
  // synchronous, waits until the standby is its synchronous standby.
  absl::Status SetSynchronous(bool synchronous);
  // Until the standby has replayed everything the primary wrote before the
  // call (through the link, which must pass).
  absl::Status WaitReplayed(absl::Duration timeout = absl::Seconds(30));
  // SIGKILL to the primary and each of its backends.
  void KillPrimary();
  // The standby ends recovery and becomes the primary; returns once it
  // accepts writes. The old primary stays down until Rebuild().
  absl::Status Promote();
  // The server that is not the primary (killed, or still a standby) is
  // made a fresh standby of the primary, on its own port, streaming (and
  // synchronous, if the pair is) when this returns.
  absl::Status Rebuild();

 private:
  PostgresReplication() = default;
  // Waits until the standby streams, synchronously if the pair is.
  absl::Status Stream();

  std::unique_ptr<PostgresServer> servers_[2];
  int primary_ = 0;
  bool synchronous_ = true;
  FaultProxy link_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_POSTGRES_REPLICATION_H_
