#include "pg_conn.h"

#include <poll.h>

#include <cerrno>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/clock.h"

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
  if (sqlstate.empty() || absl::StartsWith(sqlstate, "08") ||
      absl::StartsWith(sqlstate, "53") || absl::StartsWith(sqlstate, "57") ||
      absl::StartsWith(sqlstate, "58")) {
    return absl::UnavailableError(message);
  }
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return absl::AbortedError(message);  // retried by the caller
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

absl::StatusOr<std::unique_ptr<PgConn>> PgConn::Open(const PgOptions& options) {
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
  std::unique_ptr<PgConn> conn(
      new PgConn(raw, options.endpoint, options.statement_timeout));
  if (PQstatus(raw) != CONNECTION_OK) {
    conn->broken_ = true;
    return conn->ConnectionError("cannot connect");
  }
  if (absl::Status s = conn->Exec(
          absl::StrCat("SET statement_timeout = ",
                       absl::ToInt64Milliseconds(options.statement_timeout)));
      !s.ok()) {
    return s;
  }
  return conn;
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
  // planning.
  if (!prepared_.contains(stmt.name)) {
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
  return Await(stmt.name);
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

absl::Status PgConn::Exec(const std::string& sql) {
  if (broken_) return ConnectionError("setup");
  if (PQsendQuery(conn_, sql.c_str()) == 0) return ConnectionError("setup");
  return Await("setup").status();
}

}  // namespace dlock::postgres
