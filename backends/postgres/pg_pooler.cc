#include "pg_pooler.h"

#include <poll.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/clock.h"

namespace dlock::postgres {
namespace {

// Each round can only prove transaction pooling (a miss proves nothing), and
// clients busy on the same pool make a single round miss about one time in
// three here; a round costs five round trips on one extra connection.
constexpr int kRounds = 16;
// How long the probe waits for an answer that comes in a round trip unless
// the pooler has no server connection to give.
constexpr absl::Duration kProbeWait = absl::Seconds(1);

const Statement kBegin{"dlock_probe_begin", "BEGIN"};
const Statement kCommit{"dlock_probe_commit", "COMMIT"};
const Statement kPid{"dlock_probe_pid", "SELECT pg_backend_pid()"};

// Runs `stmt` on `conn` (not prepared: the unnamed statement), waiting at
// most kProbeWait; DeadlineExceeded when no answer came.
absl::StatusOr<PgResult> Ask(PgConn& conn, const Statement& stmt) {
  if (absl::Status s = conn.Send(stmt, {}); !s.ok()) return s;
  const MonoTime deadline = Clock::Real().Now() + kProbeWait;
  absl::StatusOr<PgResult> r = conn.Await(stmt.name, deadline);
  if (!r.ok() && absl::IsUnavailable(r.status()) &&
      Clock::Real().Now() >= deadline) {
    return absl::DeadlineExceededError(r.status().message());
  }
  return r;
}

absl::StatusOr<std::string> Pid(PgConn& conn) {
  absl::StatusOr<PgResult> r = Ask(conn, kPid);
  if (!r.ok()) return r.status();
  return GetText(r->get(), 0, 0);
}

// `conn`'s server process id, asked while `other` holds a transaction open.
// A pool with no free server connection makes `conn` wait until `other`
// commits; a slow server makes it wait too, so the wait alone proves
// nothing: after kProbeWait `other` commits, and the id that `conn` then
// gets decides (its own again, or another session).
absl::StatusOr<std::string> PidWhileOtherHolds(PgConn& conn, PgConn& other) {
  if (absl::Status s = conn.Send(kPid, {}); !s.ok()) return s;
  const MonoTime patience = Clock::Real().Now() + kProbeWait;
  // Woken by the answer's bytes, not by a timer.
  for (absl::Duration left = kProbeWait;
       !conn.AnswerReady() && left > absl::ZeroDuration();
       left = patience - Clock::Real().Now()) {
    pollfd p{conn.socket(), POLLIN, 0};
    poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
  }
  absl::Status committed = Ask(other, kCommit).status();
  absl::StatusOr<PgResult> r = conn.Await(kPid.name);
  if (!r.ok()) return r.status();
  if (!committed.ok()) return committed;
  return GetText(r->get(), 0, 0);
}

// One round on `other`, a second connection through the same pooler,
// opened by the first round once `conn` has answered (so that the pooler
// hands it a server connection only then); true when the server session
// was seen to change.
absl::StatusOr<bool> SessionMoved(const PgOptions& options, PgConn& conn,
                                  std::unique_ptr<PgConn>& other_conn) {
  absl::StatusOr<std::string> first = Pid(conn);
  if (!first.ok()) return first.status();
  if (other_conn == nullptr) {
    absl::StatusOr<std::unique_ptr<PgConn>> opened = PgConn::Open(options);
    if (!opened.ok()) return opened.status();
    other_conn = *std::move(opened);
  }
  PgConn& other = *other_conn;
  // (A pooler of single statements refuses the transaction: its error.)
  if (absl::StatusOr<PgResult> begun = Ask(other, kBegin); !begun.ok()) {
    if (!absl::IsDeadlineExceeded(begun.status())) return begun.status();
    return absl::UnavailableError(absl::StrCat(
        options.endpoint,
        ": a pooler is in between, and gave a second connection no server "
        "connection within ",
        absl::FormatDuration(kProbeWait), ": ", begun.status().message()));
  }
  absl::StatusOr<std::string> theirs = Pid(other);
  if (!theirs.ok()) return theirs.status();
  if (*theirs == *first) {
    if (absl::Status s = Ask(other, kCommit).status(); !s.ok()) return s;
    return true;
  }
  absl::StatusOr<std::string> again = PidWhileOtherHolds(conn, other);
  if (!again.ok()) return again.status();
  return *again != *first;
}

}  // namespace

absl::StatusOr<Pooling> DetectPooling(const PgOptions& options, PgConn& conn) {
  if (conn.direct()) return Pooling::kDirect;
  std::unique_ptr<PgConn> other;
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<bool> moved = SessionMoved(options, conn, other);
    if (!moved.ok()) return moved.status();
    if (*moved) return Pooling::kTransactions;
  }
  return Pooling::kSessions;
}

absl::StatusOr<Pooling> CheckPooling(const PgOptions& options, PgConn& conn) {
  absl::StatusOr<Pooling> pooling = DetectPooling(options, conn);
  if (options.mode == Mode::kLease) {
    return pooling.ok() ? *pooling : Pooling::kTransactions;
  }
  if (!pooling.ok()) return pooling.status();
  if (*pooling != Pooling::kTransactions) return *pooling;
  return absl::FailedPreconditionError(absl::StrCat(
      options.endpoint,
      ": mode=session needs each connection to keep its server session, but "
      "a pooler in between hands it to other clients between transactions "
      "(PgBouncer's pool_mode = transaction), where session mode's advisory "
      "locks would stay behind on server connections that others get; use "
      "mode=lease through this pooler, or a pool with pool_mode = session "
      "(docs/postgres.md, \"PgBouncer\")"));
}

}  // namespace dlock::postgres
