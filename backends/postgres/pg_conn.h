// Copyright dlock authors. One libpq connection with bounded waits: every
// statement is sent asynchronously and awaited with poll(), so a server that
// stops answering costs a caller at most the statement timeout (C17, C18).
#ifndef DLOCK_BACKENDS_POSTGRES_PG_CONN_H_
#define DLOCK_BACKENDS_POSTGRES_PG_CONN_H_

#include <libpq-fe.h>

#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/clock.h"
#include "pg_options.h"

namespace dlock::postgres {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// A parameterized statement, prepared on each connection the first time it
// runs there. Parameters are always sent separately from the text.
struct Statement {
  std::string name;
  std::string sql;
};

class PgConn {
 public:
  // Connects (bounded by libpq's connect_timeout per host) and, on a
  // direct connection, sets the server-side statement_timeout; a setup that
  // failed transiently is tried once more on a fresh connection. On failure,
  // a status naming the endpoint: Unauthenticated when the server refused
  // the user or its password (SQLSTATE class 28) or either side refused the
  // other's certificate, PermissionDenied when the database is missing
  // (3D000) or may not be used (42501), else Unavailable.
  static absl::StatusOr<std::unique_ptr<PgConn>> Open(const PgOptions& options);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Runs `stmt` with text parameters (nullopt-free: every parameter is set)
  // and returns its rows. A connection error or a timeout marks the
  // connection broken.
  absl::StatusOr<PgResult> Run(const Statement& stmt,
                               absl::Span<const std::string> params);
  // A statement in two halves, so that statements on several connections
  // can be in flight at once: Send() sends `stmt` and returns without
  // waiting (as a prepared statement if Run() prepared it here, else with
  // its text), Await() reads the answer. Every Send() that succeeded is
  // followed by one Await() before anything else runs on the connection.
  absl::Status Send(const Statement& stmt,
                    absl::Span<const std::string> params);
  // Waits for every result of the query just sent; returns the last one, or
  // the first error. `doing` names the statement in errors. Gives up (and
  // marks the connection broken) after answer_timeout(), or at `deadline`
  // on the real monotonic clock.
  absl::StatusOr<PgResult> Await(absl::string_view doing);
  absl::StatusOr<PgResult> Await(absl::string_view doing, MonoTime deadline);
  // The statement timeout plus a grace for the answer to travel.
  absl::Duration answer_timeout() const;
  // Reads what arrived, without blocking; true when Await() would return
  // at once (the answer is complete, or the connection failed).
  bool AnswerReady();
  // A simple query without parameters (setup, LISTEN), maybe several
  // statements; only for text that holds no caller data. `doing` names it
  // in errors.
  absl::Status Exec(const std::string& sql, absl::string_view doing = "setup");

  // Reads whatever the server sent meanwhile without blocking; false when
  // the connection is gone (the server closed it, or it was broken before).
  bool Alive();
  bool broken() const { return broken_; }
  // Whether the last Run() got as far as sending the statement itself; when
  // not, it certainly did not run and may be sent again.
  bool executed() const { return executed_; }
  int socket() const { return PQsocket(conn_); }
  PGconn* raw() { return conn_; }
  const std::string& endpoint() const { return endpoint_; }
  // Whether this is the server's own session: false behind a pooler that
  // speaks the protocol itself (PgBouncer, which sends its own process id
  // to the client), where the server session may change between
  // transactions. Such a connection prepares no statement and sets no
  // session setting (pg_pooler.h tells the pooling modes apart).
  bool direct() const { return direct_; }

  // The status for a failed connection, naming the endpoint.
  absl::Status ConnectionError(absl::string_view doing);

 private:
  PgConn(PGconn* conn, const PgOptions& options)
      : conn_(conn),
        endpoint_(options.endpoint),
        timeout_(options.statement_timeout),
        table_(options.table),
        mode_(options.mode) {}
  // Connected (the server accepted us), not set up yet.
  static absl::StatusOr<std::unique_ptr<PgConn>> Connect(
      const PgOptions& options);
  // Whether the server's session is ours, and, only then, its
  // statement_timeout set: one round trip. Unavailable when the answer was
  // another client's: PgBouncer before 1.21 puts a server connection back in
  // its pool when its client leaves with pipelined queries unanswered (it
  // takes the first ReadyForQuery for the end of them), and the next client
  // of that connection reads the rest of their answers (and its reset
  // query's) before its own, each taken for the one to the statement before.
  absl::Status Setup();
  // Marks the connection broken and has the server end its session, waiting
  // (bounded) until it did: the answers still due on it reach no later
  // client of the pooler.
  void EndServerSession();
  PGconn* conn_;
  const std::string endpoint_;
  const absl::Duration timeout_;  // server-side statement_timeout
  // For the grants a refused statement lacks (pg_privileges.h).
  const std::string table_;
  const Mode mode_;
  bool broken_ = false;
  bool executed_ = false;
  bool timed_out_ = false;  // Await() gave up waiting for an answer
  bool direct_ = true;
  bool explaining_ = false;  // a refusal's grants are being looked up
  absl::flat_hash_set<std::string> prepared_;
};

// The status for a failed result, by SQLSTATE class: connection trouble,
// shutdown, resource limits and timeouts are Unavailable; authentication
// (class 28) Unauthenticated; a missing privilege (42501) or database
// (3D000) PermissionDenied; the rest Internal.
absl::Status ResultStatus(const PGresult* result, const std::string& endpoint,
                          absl::string_view doing);

// Column `col` of row `row` as a number (0 when NULL).
int64_t GetInt(const PGresult* r, int row, int col);
std::string GetText(const PGresult* r, int row, int col);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_CONN_H_
