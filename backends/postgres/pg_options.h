// Copyright dlock authors. What a postgres:// URI means: libpq's own
// connection parameters, passed through, plus dlock's options.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_OPTIONS_H_
#define DLOCK_BACKENDS_POSTGRES_PG_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"

namespace dlock::postgres {

enum class Mode {
  kLease,    // a row per held lock, with an expiry on the server's clock
  kSession,  // the row is also bound to the holder's session (advisory lock)
};

struct PgOptions {
  // libpq connection parameters, for PQconnectdbParams. The password is in
  // here and nowhere else.
  std::vector<std::string> keywords;
  std::vector<std::string> values;
  // "postgres at host:port[,host:port]": safe for messages, never a password.
  std::string endpoint;
  std::string table = "dlock_locks";
  Mode mode = Mode::kLease;
  int pool_size = 4;
  // Server-side statement_timeout, and how long the client waits for any
  // answer before it gives the connection up (C17, C18).
  absl::Duration statement_timeout = absl::Seconds(5);
  // Session mode: at most this many dedicated connections (held locks and
  // waiters) per client.
  int max_sessions = 64;
  // Session mode: how long a holder's session may have been gone before
  // another client takes the row over, and so how long after the last
  // statement the server confirmed on a session the holder still believes
  // in its holds (C19). See docs/postgres.md, "Session mode".
  absl::Duration session_grace = absl::Seconds(3);
  // Setup (`dlock setup --grant-to`): once the schema is in place, grant
  // this role what dlock needs on it. Empty: grant nothing.
  std::string grant_to;
  // The database the listener connects to, when not the URI's: behind
  // PgBouncer in transaction pooling, an alias of the same database in
  // pool_mode = session, where LISTEN keeps its server session.
  std::string listen_dbname;
};

// `options` with another database name (libpq's dbname).
PgOptions WithDbname(const PgOptions& options, const std::string& dbname);

// Takes dlock's options from config.params and passes every other parameter
// through to libpq when libpq knows it (PQconndefaults); anything else is
// InvalidArgument naming the key.
absl::StatusOr<PgOptions> ParsePgOptions(const BackendConfig& config);

// [a-z_][a-z0-9_]*, at most 40 bytes: the table name becomes SQL text (an
// identifier cannot be a parameter), so it is checked, never escaped.
absl::Status ValidateTableName(absl::string_view table);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_OPTIONS_H_
