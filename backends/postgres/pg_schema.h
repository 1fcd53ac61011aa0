// Copyright dlock authors. The schema and every statement, built once from
// the (validated) table name. Lock names, owners and namespaces are always
// parameters; only the table's identifiers are SQL text.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_SCHEMA_H_
#define DLOCK_BACKENDS_POSTGRES_PG_SCHEMA_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "pg_conn.h"

namespace dlock::postgres {

// The schema version this build creates and understands. A table created by
// a newer version is refused; an older one is migrated. 2: dead_since and
// grace_ms, for session mode's grace (C19).
// 3: the liveness table and live_ids, for holder liveness in lease mode.
// 4: the liveness check of an acquire reads a snapshot taken under the row
// lock (function any_live), so that two waiters cannot both take a lapsed
// hold over.
// 5: the release function takes the keep after release
// (ReleaseCall::keep_for).
// 6: fencing tokens carry the server's timeline (function next_token), so
// that they keep increasing across a failover.
// 7: semaphores (issue 24): the holders table and its functions
// (pg_primitives_sql.cc).
// 8: read-write locks (pg_rw_sql.cc); the acquire statement resets a taken
// row's mode and claim and answers the mode, the release statement leaves a
// writer that also reads to write_release.
inline constexpr int kSchemaVersion = 8;

// The watchdog's batch of renewals over the rows of {R} (as `l`), with the
// extra condition {X} (pg_schema.cc).
extern const char kRenewMany[];
// `sql` with {W} the condition on one name ($2), as `<name>_inspect`, and on
// a prefix, as `<name>_list`.
void ByNameAndPrefix(const std::string& sql, const std::string& name,
                     Statement& exact, Statement& prefixed);

// Session mode's functions (pg_session_sql.cc).
extern const char kSessionSchema[];
// Version 7's parts of the schema script (pg_primitives_sql.cc,
// pg_election_sql.cc).
extern const char kPrimitivesSchema[];
extern const char kElectionSchema[];
// Version 8's (pg_rw_sql.cc).
extern const char kReadWriteSchema[];

// The statements of semaphores (C22) and elections (C24), both modes. $1
// namespace, $2 the qualified name ("\x1fs" + name), $3 owner, then as noted.
struct PrimitiveSql {
  PrimitiveSql() = default;
  // `fill` puts the quoted identifiers in.
  explicit PrimitiveSql(
      const std::function<std::string(absl::string_view)>& fill);

  // $4 lease ms, $5 wait, $6 liveness id, $7 its ttl ms, $8 N, $9 permits,
  // $10 the place's ms, $11 session mode, $12 have, $13 grace ms
  //   -> (code, token, holds, left ms, slots)
  Statement sem_acquire;
  // $4 holds, $5 channel, $6 have -> holds left (NULL: not the owner's)
  Statement sem_release;
  Statement holder_renew;       // $4 lease ms, $5 have -> bool
  Statement holder_renew_many;  // as Sql::renew_many
  Statement give_up_place;      // $4 channel
  // $1, $2, $3 token ('': every holder), $4 channel -> bool
  Statement holders_force;
  // $1, $2 the qualified name (or its prefix) -> (name, N, place owner,
  // place permits, then a holder: owner, holds, token, left us, since us,
  // slots, live), a row per holder, ordered by name.
  Statement holders_inspect;
  Statement holders_list;

  // Elections (C24), on the lock's row of "\x1fe" + name; renewed and
  // released as a lock. Lease mode: $4 lease ms, $5 liveness id, $6 its ttl
  // ms, $7 value (hex), $8 channel -> as acquire.
  Statement campaign;
  // Session mode: $4 lease ms, $5 have, $6 grace ms, $7 value (hex), $8
  // channel -> as acquire.
  Statement s_campaign;
  // $4 value (hex), $5 term, $6 channel -> one row when proclaimed
  Statement proclaim;
  // $1, $2 the qualified name (or its prefix) -> (name, owner, holds,
  // token, left us, since us, value hex, live)
  Statement leader_inspect;
  Statement leader_list;

  // Multi-locks (C25), lease mode: $2 the names (an array), $3 owner, $4
  // lease ms, $5 liveness id, $6 its ttl ms -> a row per name when all
  // were taken, or the one that refused (acquire_all in
  // pg_primitives_sql.cc).
  Statement acquire_all;

  // Read-write locks (C23), on the lock's own row ($2 the
  // plain name). $4 lease ms, $5 wait, $6 liveness id, $7 its ttl ms, $8
  // session mode, $9 have, $10 grace ms -> (code, token, holds, left ms)
  Statement read_acquire;
  // $4 holds, $5 channel, $6 have -> holds left (NULL: not the owner's)
  Statement read_release;
  Statement read_renew;  // $4 lease ms, $5 have -> bool
  // A writer refused on a read-held or handed-over row: $4 lease ms, $5
  // wait, $6 liveness id, $7 its ttl ms, $8 the intent's ms -> (code:
  // 1 granted, 0 refused, -4 upgrade refused; token, holds, left ms)
  Statement write_acquire;
  // $4 holds, $5 channel -> write holds left (NULL: not the owner's)
  Statement write_release;
  // $1, $2 -> the writer's columns, then a reader per row (pg_rw_sql.cc)
  Statement readers_inspect;
  // $1, $2 prefix -> as readers_inspect, for every live lock row, ordered
  // by name (its last column)
  Statement readers_list;
  // Session mode's writer: $4 lease ms, $5 has-session, $6 grace ms, $7
  // wait, $8 the intent's ms -> as write_acquire; its release: s_release's.
  Statement s_write_acquire;
  Statement s_write_release;

 private:
  void FillElections(const std::function<std::string(absl::string_view)>& fill);
  void FillReadWrite(const std::function<std::string(absl::string_view)>& fill);
};

struct Sql {
  explicit Sql(const std::string& table);

  std::string channel;  // NOTIFY channel: "<table>_released"
  std::string listen;   // LISTEN "<table>_released"

  // Lease mode. Parameters: $1 namespace, $2 name, $3 owner, then as noted.
  // $4 lease ms, $5 liveness id, $6 liveness ttl ms (0: none)
  //   -> (got, holds, token, holder_left_ms)
  Statement acquire;
  // $4 holds, $5 channel, $6 keep ms -> (holds left, notify)
  Statement release;
  Statement renew;     // $4 lease ms -> one row when renewed
  Statement liveness;  // $1 liveness id, $2 ttl ms: the heartbeat
  // $1 namespace, $2 names, $3 owners, $4 lease ms (arrays) -> the 1-based
  // positions renewed
  Statement renew_many;
  // Both modes.
  // $1, $2 -> (owner, holds, token, left_us, since_us, holder_live)
  Statement inspect;
  Statement list;   // $1, $2 prefix -> (name, owner, ...)
  Statement force;  // $1, $2, $3 channel -> one row when it was held
  // $1, $2, $3 channel, $4 token -> one row when it was held with the token
  Statement force_if_token;
  Statement sweep;   // no parameters: deletes rows free for 10 minutes
  Statement memory;  // no parameters: the lock table's bytes, with indexes
  // Session mode: calls of the functions the schema defines.
  // $4 holds, $5 has-session, $6 keep session, $7 channel, $8 keep ms
  Statement s_release;
  Statement s_renew;  // $4 lease ms, $5 has-session -> bool
  Statement ping;     // no parameters: confirms a session is alive

  PrimitiveSql primitives;

  std::string schema_version;  // SELECT the version (42P01 when missing)
  std::string create_schema;   // one transaction, idempotent
};

// Creates the schema on first use, or checks its version.
absl::Status EnsureSchema(PgConn& conn, const Sql& sql);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_SCHEMA_H_
