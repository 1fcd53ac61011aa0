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

namespace dlock::testing {

// initdb in a temporary directory owned by the unprivileged user `postgres`
// (the server refuses to run as root), then a postgres on a free loopback
// port with its unix socket in the same directory, fsync off. The data stay
// across Restart(); the directory is removed by the destructor.
class PostgresServer {
 public:
  // Fails with FailedPrecondition, saying what to install, when the
  // PostgreSQL 15 server binaries or the `postgres` user are missing.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();

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
  absl::Status InitDb();
  // Signals the postmaster's children, then the postmaster; returns the
  // children signalled.
  std::vector<pid_t> SignalAll(int signal);

  std::string dir_;
  std::string data_dir_;
  int port_ = 0;
  int starts_ = 0;  // each start logs to its own file, to find its banner
  ChildProcess process_;
};

}  // namespace dlock::testing

#endif  // DLOCK_INTEGRATION_POSTGRES_SERVER_H_
