// Copyright dlock authors. A throwaway PostgreSQL server for tests.
#ifndef DLOCK_INTEGRATION_POSTGRES_SERVER_H_
#define DLOCK_INTEGRATION_POSTGRES_SERVER_H_

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server_process.h"

namespace dlock::test {

// initdb in a temporary directory owned by the unprivileged user `postgres`
// (the server refuses to run as root), then a postgres on a free loopback
// port with its unix socket in the same directory, fsync off. The data stay
// across Restart(); the directory is removed by the destructor. A standby
// (StartStandby) starts from a base backup of its primary instead, and
// streams from it until Promote().
class PostgresServer {
 public:
  struct Options {
    // More server settings ("name=value"), passed with -c on every start.
    std::vector<std::string> settings;
    // pg_hba.conf lines put before initdb's, which trust every local user.
    std::vector<std::string> hba;
    // A certificate and its key (PEM files) to serve TLS with (ssl=on);
    // copied into the data directory, where the server may read them.
    std::string ssl_cert_file;
    std::string ssl_key_file;
    // With TLS: the CA whose certificates clients may present (pg_hba.conf's
    // `cert` method checks them against it).
    std::string ssl_ca_file;
  };

  // Fails with FailedPrecondition, saying what to install, when the
  // PostgreSQL 15 server binaries or the `postgres` user are missing.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(Options options);
  // A streaming standby of `primary` on a port of its own: a base backup
  // of it (pg_basebackup, replication slot `slot` created on the primary),
  // started in recovery (standby.signal), replicating through
  // 127.0.0.1:`via_port` (a proxy in front of the primary; its own port
  // when 0). Returns once the standby accepts read-only connections.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> StartStandby(
      const PostgresServer& primary, const std::string& slot, int via_port = 0);
  ~PostgresServer();

  // Stops this server, drops its data, and makes it a standby of `primary`
  // as StartStandby() does, on the same port: a failed primary rejoins.
  absl::Status RebuildAsStandbyOf(const PostgresServer& primary,
                                  const std::string& slot, int via_port);
  // Ends recovery (pg_promote): returns once the server accepts writes.
  absl::Status Promote();

  int port() const { return port_; }
  // The directory of the server's unix socket (libpq's `host=<dir>`).
  const std::string& socket_dir() const { return dir_; }
  // postgres://postgres@127.0.0.1:<port>/postgres, with `namespace=ns` and
  // `extra` ("mode=session&pool_size=2") as query parameters when set.
  std::string Uri(const std::string& ns = "",
                  const std::string& extra = "") const;
  // The same URI with another port: a FaultProxy's in front of the server.
  std::string UriAt(int port, const std::string& ns = "",
                    const std::string& extra = "") const;

  // Runs `sql` (one or more statements) with psql as the superuser over the
  // server's unix socket, not through any proxy, and returns what it printed
  // (unaligned, rows only). Internal with psql's output when it failed.
  absl::StatusOr<std::string> Psql(const std::string& sql) const;
  // pg_terminate_backend() for every session whose application_name is
  // `application_name`; returns how many there were. The server closes
  // their connections: a client behind a stalled proxy does not hear it.
  absl::StatusOr<int> TerminateBackends(
      const std::string& application_name) const;

  // Fast shutdown (clients are disconnected, data kept), then a start on
  // the same port: what an operator's restart does.
  absl::Status Restart();
  void StopServer();
  // SIGKILL to the postmaster and every backend, as a crash or an OOM kill
  // would; StartServer() then runs crash recovery on the same data.
  void Kill();
  absl::Status StartServer();
  // SIGSTOP / SIGCONT to the postmaster and each of its children: every
  // backend is a process group of its own, so the group signal misses them.
  void Pause() { SignalAll(SIGSTOP); }
  void Resume() { SignalAll(SIGCONT); }

 private:
  PostgresServer() = default;
  // The temporary directory, owned by `postgres`, and a port.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Prepare(
      Options options);
  absl::Status InitDb();
  absl::Status InstallHbaAndCertificates();
  absl::Status BaseBackup(const PostgresServer& primary,
                          const std::string& slot, int via_port);
  // Signals the postmaster's children, then the postmaster; returns the
  // children signalled.
  std::vector<pid_t> SignalAll(int signal);

  Options options_;
  std::string dir_;
  std::string data_dir_;
  uid_t uid_ = 0;  // the user `postgres`, who owns them
  gid_t gid_ = 0;
  int port_ = 0;
  int starts_ = 0;  // each start logs to its own file, to find its banner
  ChildProcess process_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_POSTGRES_SERVER_H_
