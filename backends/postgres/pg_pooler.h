// Copyright dlock authors. Whether a client's connections keep their server
// session between transactions. Behind a pooler that speaks the protocol
// itself (PgBouncer; PgConn::direct() is false) that depends on its mode:
// pooling sessions, each client connection keeps one server connection
// while it is open, and session mode works; pooling transactions (or
// statements), each transaction runs on whichever server connection is free,
// so that session-level state (session mode's advisory locks, LISTEN) stays
// on a server connection that other clients get next. The pooler does not
// say which mode it runs in (it answers SHOW only on its admin console), so
// a probe tells them apart.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_POOLER_H_
#define DLOCK_BACKENDS_POSTGRES_PG_POOLER_H_

#include "absl/status/statusor.h"
#include "pg_conn.h"
#include "pg_options.h"

namespace dlock::postgres {

enum class Pooling {
  kDirect,        // the server's own session: no pooler in between
  kSessions,      // each client connection keeps its server session
  kTransactions,  // the server session may change at every transaction
};

// `conn`: a connection just opened with `options`, idle. The probe, behind
// a pooler only: `conn` asks for its server process id; a second client
// connection then opens a transaction (which pins a server connection) and
// asks for its own; then `conn` asks again. Sharing one server session
// across two client connections, or `conn` finding another one, is
// transaction pooling. Sessions kept is the only other outcome: with the
// pooler's default LIFO reuse, an idle pool hands the second connection the
// server connection `conn` just used, and a busy one gives `conn` another;
// but other clients of the pool can take it first, so the probe runs up to
// sixteen rounds (a few milliseconds when sessions are kept) and stops at
// the first change seen. A pooler that
// gives the second connection no server within a second cannot serve a
// client that needs a connection per hold either: Unavailable.
absl::StatusOr<Pooling> DetectPooling(const PgOptions& options, PgConn& conn);

// DetectPooling(), and whether options.mode can live with the answer:
// session mode refuses transaction pooling (FailedPrecondition saying what
// to use instead); lease mode works with either, and takes an inconclusive
// probe for transaction pooling.
absl::StatusOr<Pooling> CheckPooling(const PgOptions& options, PgConn& conn);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_POOLER_H_
