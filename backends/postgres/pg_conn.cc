#include "pg_conn.h"

#include <poll.h>

#include <cerrno>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/clock.h"
#include "dlock/ride_out.h"
#include "pg_privileges.h"

namespace dlock::postgres {
namespace {

// How long past the server-side statement timeout the client waits before it
// decides the server itself is stuck (paused, partitioned) and drops the
// connection.
constexpr absl::Duration kClientGrace = absl::Seconds(1);

std::string Trimmed(const char* message) {
  std::string out = message == nullptr ? "" : message;
  absl::StripTrailingAsciiWhitespace(&out);
  return out.empty() ? "connection lost" : out;
}

// The SQLSTATE in the last "SEVERITY:  XXXXX: " of a verbose libpq message;
// empty when there is none.
std::string LastSqlstate(absl::string_view verbose) {
  std::string found;
  for (size_t at = verbose.find(":  "); at != absl::string_view::npos;
       at = verbose.find(":  ", at + 1)) {
    const absl::string_view code = verbose.substr(at + 3, 7);
    bool ok = code.size() == 7 && code.substr(5) == ": ";
    for (size_t i = 0; ok && i < 5; ++i) {
      ok = absl::ascii_isdigit(code[i]) || absl::ascii_isupper(code[i]);
    }
    if (ok) found = std::string(code.substr(0, 5));
  }
  return found;
}

// The SQLSTATE of the error a server reported while refusing a connection.
// libpq keeps no error fields for a failed connection, and writes the code
// into its message only when asked for verbose messages, which
// PQconnectdbParams cannot be before it connects: so the connection is
// started, made verbose, and made again (PQreset, which keeps libpq's own
// connect_timeout per host). Only on a failure the server reported.
std::string RefusalSqlstate(const std::vector<const char*>& keys,
                            const std::vector<const char*>& values) {
  PGconn* again = PQconnectStartParams(keys.data(), values.data(), 0);
  if (again == nullptr) return "";
  PQsetErrorVerbosity(again, PQERRORS_VERBOSE);
  PQreset(again);
  const std::string sqlstate = PQstatus(again) == CONNECTION_OK
                                   ? ""
                                   : LastSqlstate(PQerrorMessage(again));
  PQfinish(again);
  return sqlstate;
}

// TLS: the server's certificate failed verification (unknown CA, expired,
// another name) or the server refused ours. OpenSSL's reasons are never
// translated; the host-name message is libpq's own.
bool CertificateRefused(absl::string_view message) {
  return absl::StrContains(message, "certificate verify failed") ||
         absl::StrContains(message, "does not match host name") ||
         (absl::StrContains(message, "alert") &&
          (absl::StrContains(message, "certificate") ||
           absl::StrContains(message, "unknown ca")));
}

absl::Status ConnectFailure(const PgOptions& options, PGconn* failed,
                            const std::vector<const char*>& keys,
                            const std::vector<const char*>& values) {
  const std::string message = Trimmed(PQerrorMessage(failed));
  // libpq's messages name hosts and users, never the password.
  std::string text =
      absl::StrCat(options.endpoint, ": cannot connect: ", message);
  if (PQconnectionNeedsPassword(failed)) {
    return absl::UnauthenticatedError(
        absl::StrCat(text,
                     "; the server asks for a password and none was given "
                     "(password_env, password_file or PGPASSFILE)"));
  }
  if (CertificateRefused(message)) return absl::UnauthenticatedError(text);
  // libpq writes an error the server sent as "SEVERITY:  message".
  const std::string sqlstate =
      absl::StrContains(message, ":  ") ? RefusalSqlstate(keys, values) : "";
  if (sqlstate.empty()) return absl::UnavailableError(text);
  absl::StrAppend(&text, " (SQLSTATE ", sqlstate, ")");
  if (absl::StartsWith(sqlstate, "28")) {
    return absl::UnauthenticatedError(text);
  }
  if (sqlstate == "3D000" || sqlstate == "42501") {
    return absl::PermissionDeniedError(text);
  }
  return absl::UnavailableError(text);
}

}  // namespace

absl::Status ResultStatus(const PGresult* result, const std::string& endpoint,
                          absl::string_view doing) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const std::string sqlstate = state == nullptr ? "" : state;
  const std::string message = absl::StrCat(
      endpoint, ": ", doing, ": ",
      Trimmed(PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY)),
      sqlstate.empty() ? "" : absl::StrCat(" (SQLSTATE ", sqlstate, ")"));
  // 08 connection, 53 resources, 57 operator intervention (shutdown, statement
  // timeout), 58 system errors: the server is there but cannot serve now.
  // 25006: a read-only server, a standby not yet promoted.
  if (sqlstate.empty() || absl::StartsWith(sqlstate, "08") ||
      sqlstate == "25006" || absl::StartsWith(sqlstate, "53") ||
      absl::StartsWith(sqlstate, "57") || absl::StartsWith(sqlstate, "58")) {
    return absl::UnavailableError(message);
  }
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return absl::AbortedError(message);  // retried by the caller
  }
  if (absl::StartsWith(sqlstate, "28")) {
    return absl::UnauthenticatedError(message);
  }
  if (sqlstate == "42501" || sqlstate == "3D000") {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

int64_t GetInt(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  int64_t v = 0;
  if (!absl::SimpleAtoi(PQgetvalue(r, row, col), &v)) return 0;
  return v;
}

std::string GetText(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

absl::StatusOr<std::unique_ptr<PgConn>> PgConn::Connect(
    const PgOptions& options) {
  std::vector<const char*> keys, values;
  for (size_t i = 0; i < options.keywords.size(); ++i) {
    keys.push_back(options.keywords[i].c_str());
    values.push_back(options.values[i].c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // expand_dbname = 0: a database name is only ever a name, never parsed as
  // a connection string.
  PGconn* raw = PQconnectdbParams(keys.data(), values.data(), 0);
  if (raw == nullptr) {
    return absl::ResourceExhaustedError(
        "libpq could not allocate a connection");
  }
  // libpq prints notices (and the FATAL a server sends as it shuts down) on
  // stderr by default; errors reach callers as statuses instead.
  PQsetNoticeProcessor(
      raw, [](void*, const char*) {}, nullptr);
  std::unique_ptr<PgConn> conn(new PgConn(raw, options));
  if (PQstatus(raw) != CONNECTION_OK) {
    conn->broken_ = true;
    return ConnectFailure(options, raw, keys, values);
  }
  return conn;
}

absl::StatusOr<std::unique_ptr<PgConn>> PgConn::Open(const PgOptions& options) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<std::unique_ptr<PgConn>> conn = Connect(options);
    if (!conn.ok()) return conn.status();
    absl::Status s = (*conn)->Setup();
    if (s.ok()) return conn;
    // The server took the connection and its setup failed transiently
    // (core's rule, dlock::IsTransient), which left nothing behind but a
    // session this client drops: once more, on a fresh connection. Not
    // after a server that did not answer in time: that would double the
    // bound on the caller's wait.
    if (attempt > 0 || !IsTransient(s) || (*conn)->timed_out_) return s;
  }
}

absl::Status PgConn::Setup() {
  // PgBouncer sends the client a process id of its own (BackendKeyData),
  // never the server's: a pooler that speaks the protocol itself shows as
  // a mismatch. A plain TCP proxy passes the server's through. Only a
  // direct session gets the timeout: set through a pooler, it would stay
  // on a server connection that other clients get next. The tag tells the
  // answer to this query from another client's (EndServerSession()).
  const int pid = PQbackendPID(conn_);
  const std::string tag = absl::StrCat(absl::Uniform<uint64_t>(absl::BitGen()));
  const std::string sql = absl::StrCat(
      "SELECT pg_backend_pid() = ", pid, ", CASE WHEN pg_backend_pid() = ", pid,
      " THEN set_config('statement_timeout', '",
      absl::ToInt64Milliseconds(timeout_), "', false) END, '", tag, "'");
  if (PQsendQuery(conn_, sql.c_str()) == 0) return ConnectionError("setup");
  absl::StatusOr<PgResult> r = Await("setup");
  if (!r.ok() && broken_) return r.status();
  if (r.ok() && PQntuples(r->get()) == 1 && PQnfields(r->get()) == 3 &&
      GetText(r->get(), 0, 2) == tag) {
    direct_ = GetText(r->get(), 0, 0) == "t";
    return absl::OkStatus();
  }
  EndServerSession();
  return absl::UnavailableError(absl::StrCat(
      endpoint_,
      ": setup: the first answer was not to this connection's query (a "
      "pooler handed over a server connection with another client's answers "
      "still coming); ended that server session"));
}

void PgConn::EndServerSession() {
  broken_ = true;
  // Any role may end its own backend.
  if (PQsendQuery(conn_, "SELECT pg_terminate_backend(pg_backend_pid())") ==
      0) {
    return;
  }
  const Clock& clock = Clock::Real();
  const MonoTime deadline = clock.Now() + answer_timeout();
  // Until the server closes the connection; what arrives before is not ours
  // to keep.
  while (PQstatus(conn_) == CONNECTION_OK) {
    const absl::Duration left = deadline - clock.Now();
    if (left <= absl::ZeroDuration()) return;
    pollfd p{PQsocket(conn_), POLLIN, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    if (poll(&p, 1, ms) < 0 && errno != EINTR) return;
    if (PQconsumeInput(conn_) == 0) return;
    while (!PQisBusy(conn_)) {
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) break;
      PQclear(r);
    }
  }
}

PgConn::~PgConn() { PQfinish(conn_); }

absl::Status PgConn::ConnectionError(absl::string_view doing) {
  broken_ = true;
  // libpq's messages name hosts and users, never the password.
  return absl::UnavailableError(absl::StrCat(endpoint_, ": ", doing, ": ",
                                             Trimmed(PQerrorMessage(conn_))));
}

bool PgConn::Alive() {
  if (broken_ || PQstatus(conn_) != CONNECTION_OK) {
    broken_ = true;
    return false;
  }
  // A server that went away left a FATAL message and then EOF on the
  // socket: the first read takes the message, the second sees the EOF.
  // Non-blocking: libpq's socket is non-blocking at the OS level.
  for (int round = 0; round < 2; ++round) {
    pollfd p{PQsocket(conn_), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) break;
    if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK) {
      broken_ = true;
      return false;
    }
  }
  // Notices or notifications that arrived meanwhile are not ours to keep.
  while (PGnotify* n = PQnotifies(conn_)) PQfreemem(n);
  return true;
}

absl::Duration PgConn::answer_timeout() const {
  return timeout_ + kClientGrace;
}

bool PgConn::AnswerReady() {
  if (broken_) return true;
  if (PQconsumeInput(conn_) == 0) return true;  // Await() reports the error
  return !PQisBusy(conn_);
}

absl::StatusOr<PgResult> PgConn::Await(absl::string_view doing) {
  // Monotonic: a step of the wall clock must neither cut a statement short
  // nor let a stuck server hold the caller longer.
  return Await(doing, Clock::Real().Now() + answer_timeout());
}

absl::StatusOr<PgResult> PgConn::Await(absl::string_view doing,
                                       MonoTime deadline) {
  const Clock& clock = Clock::Real();
  const int fd = PQsocket(conn_);
  PgResult first_error;
  PgResult last;
  while (true) {
    while (PQisBusy(conn_)) {
      const absl::Duration left = deadline - clock.Now();
      if (left <= absl::ZeroDuration()) {
        broken_ = true;
        timed_out_ = true;
        return absl::UnavailableError(
            absl::StrCat(endpoint_, ": ", doing, ": no answer within ",
                         absl::FormatDuration(timeout_ + kClientGrace),
                         "; dropped the connection"));
      }
      pollfd p{fd, POLLIN, 0};
      int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      int n = poll(&p, 1, ms);
      if (n < 0 && errno != EINTR) return ConnectionError(doing);
      if (n > 0 && PQconsumeInput(conn_) == 0) return ConnectionError(doing);
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE ||
        st == PGRES_NONFATAL_ERROR) {
      if (first_error == nullptr) {
        first_error.reset(r);
      } else {
        PQclear(r);
      }
    } else {
      last.reset(r);
    }
  }
  if (PQstatus(conn_) != CONNECTION_OK) return ConnectionError(doing);
  if (first_error != nullptr) {
    // A statement timeout (57014) or a resource error leaves the session
    // usable; connection errors and shutdowns (08, 57P) do not.
    const char* state = PQresultErrorField(first_error.get(), PG_DIAG_SQLSTATE);
    const absl::string_view sqlstate = state == nullptr ? "" : state;
    if (sqlstate.empty() || absl::StartsWith(sqlstate, "08") ||
        absl::StartsWith(sqlstate, "57P")) {
      broken_ = true;
    }
    return ResultStatus(first_error.get(), endpoint_, doing);
  }
  if (last == nullptr) {
    return absl::InternalError(
        absl::StrCat(endpoint_, ": ", doing, ": no result"));
  }
  return last;
}

absl::StatusOr<PgResult> PgConn::Run(const Statement& stmt,
                                     absl::Span<const std::string> params) {
  executed_ = false;
  if (broken_) return ConnectionError(stmt.name);
  // Prepared the first time it runs here: later runs skip parsing and
  // planning. Behind a pooler a named statement could be missing from the
  // next server session: there, every run sends its text (the unnamed
  // statement, parsed with its parameters in the same round trip).
  if (direct_ && !prepared_.contains(stmt.name)) {
    if (PQsendPrepare(conn_, stmt.name.c_str(), stmt.sql.c_str(), 0, nullptr) ==
        0) {
      return ConnectionError(absl::StrCat("preparing ", stmt.name));
    }
    absl::StatusOr<PgResult> prepared =
        Await(absl::StrCat("preparing ", stmt.name));
    if (!prepared.ok()) return prepared.status();
    prepared_.insert(stmt.name);
  }
  if (absl::Status sent = Send(stmt, params); !sent.ok()) return sent;
  absl::StatusOr<PgResult> result = Await(stmt.name);
  if (result.ok() || !absl::IsPermissionDenied(result.status()) ||
      explaining_) {
    return result;
  }
  // Name the grants the user lacks (looked up on this connection, which
  // a refused statement leaves usable).
  explaining_ = true;
  absl::Status explained = ExplainDenied(*this, result.status(), table_, mode_);
  explaining_ = false;
  return explained;
}

absl::Status PgConn::Send(const Statement& stmt,
                          absl::Span<const std::string> params) {
  executed_ = false;
  if (broken_) return ConnectionError(stmt.name);
  executed_ = true;  // from here on the server may have run it
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const std::string& p : params) {
    values.push_back(p.c_str());
    lengths.push_back(static_cast<int>(p.size()));
  }
  const int n = static_cast<int>(values.size());
  // Not prepared here yet: the text goes with the parameters in the same
  // round trip, since waiting for a prepare would hold up the statements
  // that the caller sends on other connections after this one.
  const int ok =
      prepared_.contains(stmt.name)
          ? PQsendQueryPrepared(conn_, stmt.name.c_str(), n, values.data(),
                                lengths.data(), nullptr, 0)
          : PQsendQueryParams(conn_, stmt.sql.c_str(), n, nullptr,
                              values.data(), lengths.data(), nullptr, 0);
  if (ok == 0) return ConnectionError(stmt.name);
  return absl::OkStatus();
}

absl::Status PgConn::Exec(const std::string& sql, absl::string_view doing) {
  if (broken_) return ConnectionError(doing);
  if (PQsendQuery(conn_, sql.c_str()) == 0) return ConnectionError(doing);
  return Await(doing).status();
}

}  // namespace dlock::postgres
