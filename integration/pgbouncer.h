// Copyright dlock authors. A throwaway PgBouncer (Debian's pgbouncer) in
// front of a test PostgreSQL server, in a temporary directory, on a free
// loopback port, run as the user `postgres` (PgBouncer refuses root). Every
// database name goes to the server; users log in with trust, as the server
// lets them.
#ifndef DLOCK_INTEGRATION_PGBOUNCER_H_
#define DLOCK_INTEGRATION_PGBOUNCER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server_process.h"

namespace dlock::test {

class PgBouncer {
 public:
  struct Options {
    int server_port = 0;  // the PostgreSQL server's, on 127.0.0.1
    // "session", "transaction" or "statement".
    std::string pool_mode = "transaction";
    // Server connections per user and database.
    int pool_size = 20;
    // The users that may log in (PgBouncer's auth_file).
    std::vector<std::string> users = {"postgres"};
    // When set, a database of that name that is the server's `postgres`
    // pooled by session whatever pool_mode says (dlock's listen_dbname).
    std::string session_alias;
  };

  // FailedPrecondition naming the package when pgbouncer is missing.
  static absl::StatusOr<std::unique_ptr<PgBouncer>> Start(Options options);
  ~PgBouncer();  // stops it and removes its directory

  int port() const { return port_; }
  // Until a login of each user to each database through PgBouncer (the
  // server's and the session alias) reaches the server (psql): after the
  // server restarted, PgBouncer refuses a pool's clients for
  // server_login_retry after its failed server login, pool by pool.
  absl::Status WaitServing(absl::Duration timeout = absl::Seconds(30));
  // Runs `sql` with psql through PgBouncer as `postgres` (on whichever
  // server connection PgBouncer gives) and returns what it printed
  // (unaligned, rows only, trailing newline removed).
  absl::StatusOr<std::string> Query(const std::string& sql);
  // The same as `user`.
  absl::StatusOr<std::string> QueryAs(const std::string& user,
                                      const std::string& sql,
                                      const std::string& dbname = "postgres");
  // postgres://<user>@127.0.0.1:<port>/postgres?<query>
  std::string Uri(const std::string& user, const std::string& query) const;

 private:
  PgBouncer() = default;
  std::string dir_;
  int port_ = 0;
  std::vector<std::string> users_;
  std::string session_alias_;
  ChildProcess process_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_PGBOUNCER_H_
