#include "pg_schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace dlock::postgres {
namespace {

// {T} the table, {S} the fencing sequence, {M} the meta table, {F} the prefix
// of the session-mode functions, {V} the liveness table; all quoted
// identifiers of a validated name.
//
// A row is live while expires_at is in the future (and, for a session-mode
// row, while some session holds the shared advisory lock on session_key). A
// released row stays, free (owner '', expires_at = release time), so that
// the next fresh hold takes its token under the row lock: strictly greater
// than the last one (C8). The sweeper deletes rows free for 10 minutes.
//
// Version 2 adds dead_since and grace_ms (session mode, C19): a row whose
// holder's session is gone is taken over only once it has been seen gone for
// the holder's grace on the server's clock. The same script creates a fresh
// schema and migrates a version-1 one, under the same advisory lock; the
// version-1 acquire function is dropped so that an older client cannot take
// over a row within its holder's grace.
//
// Versions 3 and 4 add holder liveness in lease mode (see below).
//
// Version 5 keeps a lock after its release (ReleaseCall::keep_for): the row
// stays with owner '' (no owner id is empty), holds 0, no session_key and
// no live_ids, live until expires_at = release time + keep. No owner
// matches it, no session's end and no client's liveness frees it, and
// acquirers of either mode wait until it expires. The release function
// takes the keep (p_keep_ms), so the older one is dropped.
//
// Version 6 draws fencing tokens with the function next_token (below), so
// that they keep increasing across a failover.
//
// Version 7 adds semaphores (pg_primitives_sql.cc): the lock table's mode,
// claim and limit columns, the holders table and their functions. Version 8
// read-write locks (pg_rw_sql.cc), and the changes to the acquire and
// release statements below that readers need.
constexpr char kCreate[] = R"sql(
BEGIN;
SELECT pg_advisory_xact_lock(7238085217420861440);
CREATE TABLE IF NOT EXISTS {M} (version integer NOT NULL);
CREATE SEQUENCE IF NOT EXISTS {S} AS bigint;
CREATE TABLE IF NOT EXISTS {T} (
  namespace text NOT NULL,
  name text NOT NULL,
  owner text NOT NULL,
  holds bigint NOT NULL,
  fencing_token bigint NOT NULL,
  kept_lease_ms bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  since timestamptz NOT NULL,
  session_key bigint,
  wanted boolean NOT NULL DEFAULT false,
  PRIMARY KEY (namespace, name)
) WITH (fillfactor = 70);
-- Version 2. dead_since: when an acquirer first found the row's session
-- gone (NULL while it is found alive). grace_ms: the holder's session_grace;
-- NULL on rows held by a version-1 client, which believed in its hold until
-- its lease ended, so such a row is taken over only then.
ALTER TABLE {T} ADD COLUMN IF NOT EXISTS dead_since timestamptz,
  ADD COLUMN IF NOT EXISTS grace_ms bigint;
DROP FUNCTION IF EXISTS {F}acquire"(text, text, text, bigint, boolean);
-- Version 3: holder liveness (lease mode). A row per client whose
-- live_until its heartbeat keeps ahead (server clock); live_ids on a lock
-- row lists the clients whose liveness protects the hold (NULL: its lease
-- alone ends it). A lease-mode acquirer takes over a row none of whose
-- clients is live, whatever its lease.
CREATE TABLE IF NOT EXISTS {V} (
  client text PRIMARY KEY,
  live_until timestamptz NOT NULL
);
ALTER TABLE {T} ADD COLUMN IF NOT EXISTS live_ids text[];

-- Version 4: whether any of p_ids is live, read with a snapshot of its own.
-- An acquire decides a takeover under the row lock, after waiting for a
-- concurrent acquire that took the row and refreshed its own liveness; the
-- acquire's statement snapshot predates that refresh (or that client's
-- first liveness row), so reading {V} in it would find the new holder
-- lapsed and take the lock from it. A VOLATILE plpgsql function takes a
-- fresh snapshot per query, once the row lock is ours: it sees every
-- refresh committed before, and one committed after is confirmed to its
-- client only after the record it replaces had lapsed (C19).
CREATE OR REPLACE FUNCTION {F}any_live"(p_ids text[])
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  RETURN EXISTS (SELECT 1 FROM {V} v
                 WHERE v.client = ANY(p_ids)
                   AND v.live_until > clock_timestamp());
END
$fn$;

DROP FUNCTION IF EXISTS {F}release"(text, text, text, bigint, boolean,
    boolean, text);

-- Version 6: the next fencing token (C8). The sequence alone does not keep
-- tokens increasing across a failover: it is logged only every 32 values
-- (and at the first draw after a checkpoint), so a standby promoted after
-- asynchronous replication lost the last records restarts it from the value
-- logged before them and hands out again tokens the old primary granted.
-- Each promotion starts a new, larger timeline (the first 8 hex digits of
-- the WAL file name): it is the token's high bits, the sequence the low 48,
-- so every token of a later timeline is above every token of an earlier one.
CREATE OR REPLACE FUNCTION {F}next_token"()
RETURNS bigint LANGUAGE sql VOLATILE AS $fn$
  SELECT (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))
      ::bit(32)::bigint << 48) + nextval('{S}')
$fn$;

)sql";

// After versions 7's and 8's parts, in the same transaction.
constexpr char kCreateEnd[] = R"sql(
INSERT INTO {M} SELECT 8 WHERE NOT EXISTS (SELECT 1 FROM {M});
UPDATE {M} SET version = 8 WHERE version < 8;
COMMIT;
)sql";

// Fresh hold, re-entry, or a waiter's mark, decided once under the row lock:
// "again" (ours and live) implies "take" (ours, or free or expired, or every
// client whose liveness protects it lapsed). A failed attempt changes
// nothing but `wanted`, so that the holder's release knows to NOTIFY;
// uncontended releases announce nothing (C9). The last column is how long
// until the holder's lease or liveness may end, when to look again. $5 the
// caller's liveness id, $6 its TTL in ms (0: none): a grant records it on
// the row and refreshes its liveness row in the same statement. A taken row
// drops a read-write lock's mode and intent (pg_rw_sql.cc); the mode is
// answered, so that a writer refused by readers asks write_acquire.
constexpr char kAcquire[] = R"sql(
WITH a AS (
INSERT INTO {T} AS l (namespace, name, owner, holds, fencing_token,
    kept_lease_ms, expires_at, since, live_ids)
VALUES ($1, $2, $3, 1, {F}next_token"(), $4::bigint,
    clock_timestamp() + $4::bigint * interval '1 millisecond',
    clock_timestamp(), CASE WHEN $6::bigint > 0 THEN ARRAY[$5::text] END)
ON CONFLICT (namespace, name) DO UPDATE SET
  (owner, holds, fencing_token, kept_lease_ms, expires_at, since, session_key,
   wanted, live_ids, mode, claim_owner, claim_until) =
  (SELECT
     CASE WHEN d.take THEN $3 ELSE l.owner END,
     CASE WHEN d.again THEN l.holds + 1 WHEN d.take THEN 1 ELSE l.holds END,
     CASE WHEN d.again OR NOT d.take THEN l.fencing_token
          ELSE {F}next_token"() END,
     CASE WHEN d.again THEN GREATEST(l.kept_lease_ms, $4::bigint)
          WHEN d.take THEN $4::bigint ELSE l.kept_lease_ms END,
     CASE WHEN d.again THEN GREATEST(l.expires_at,
              d.now + $4::bigint * interval '1 millisecond')
          WHEN d.take THEN d.now + $4::bigint * interval '1 millisecond'
          ELSE l.expires_at END,
     CASE WHEN d.again OR NOT d.take THEN l.since ELSE d.now END,
     CASE WHEN d.again OR NOT d.take THEN l.session_key END,
     CASE WHEN d.again THEN l.wanted ELSE NOT d.take END,
     CASE WHEN NOT d.take THEN l.live_ids
          WHEN $6::bigint = 0 THEN NULL
          WHEN NOT d.again THEN ARRAY[$5::text]
          WHEN l.live_ids IS NULL OR $5::text = ANY(l.live_ids)
            THEN l.live_ids
          ELSE l.live_ids || $5::text END,
     CASE WHEN d.take AND NOT d.again THEN NULL ELSE l.mode END,
     CASE WHEN d.take THEN NULL ELSE l.claim_owner END,
     CASE WHEN d.take THEN NULL ELSE l.claim_until END
   FROM (SELECT l.owner = $3 AND l.expires_at > clock_timestamp() AS again,
                l.owner = $3 OR l.expires_at <= clock_timestamp()
                  OR (l.live_ids IS NOT NULL
                      AND NOT {F}any_live"(l.live_ids)) AS take,
                clock_timestamp() AS now) d)
RETURNING l.owner = $3 AS got, l.holds, l.fencing_token, GREATEST(0, ceil(
    extract(epoch FROM LEAST(l.expires_at, (SELECT max(v.live_until)
        FROM {V} v WHERE v.client = ANY(l.live_ids)))
      - clock_timestamp()) * 1000))::bigint AS left_ms, l.mode),
v AS (
INSERT INTO {V} (client, live_until)
SELECT $5, clock_timestamp() + $6::bigint * interval '1 millisecond'
  FROM a WHERE a.got AND $6::bigint > 0
ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until)
SELECT * FROM a
)sql";

// The heartbeat: $1 the client's liveness id, $2 its TTL in ms.
constexpr char kLiveness[] = R"sql(
INSERT INTO {V} (client, live_until)
VALUES ($1, clock_timestamp() + $2::bigint * interval '1 millisecond')
ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until
)sql";

// The notification is sent at commit, so a woken waiter finds the row free;
// only when a waiter marked the row (`wanted`). $6: ms to keep the lock
// after its last hold (0: free it); a kept row is owner '' until expires_at.
// Announced all the same: woken waiters look again and sleep until then.
// A writer that also reads ('w') is left to write_release (pg_rw_sql.cc).
constexpr char kRelease[] = R"sql(
WITH r AS (
  UPDATE {T} AS l SET
    holds = GREATEST(l.holds - $4::bigint, 0),
    owner = CASE WHEN l.holds > $4::bigint THEN l.owner ELSE '' END,
    expires_at = CASE WHEN l.holds > $4::bigint THEN l.expires_at
                      ELSE clock_timestamp()
                          + $6::bigint * interval '1 millisecond' END,
    -- A kept lock is nobody's: no client's liveness may end it early.
    live_ids = CASE WHEN l.holds > $4::bigint THEN l.live_ids END
  WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3
    AND l.expires_at > clock_timestamp() AND l.mode IS DISTINCT FROM 'w'
  RETURNING l.holds, l.wanted)
SELECT holds,
  CASE WHEN holds = 0 AND wanted THEN pg_notify($5, $1 || ':' || $2)::text END
FROM r
)sql";

constexpr char kRenew[] = R"sql(
UPDATE {T} AS l SET
  kept_lease_ms = GREATEST(l.kept_lease_ms, $4::bigint),
  expires_at = GREATEST(l.expires_at, clock_timestamp()
      + GREATEST(l.kept_lease_ms, $4::bigint) * interval '1 millisecond')
WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3
  AND l.expires_at > clock_timestamp()
RETURNING 1
)sql";

// A session-mode row counts only while a session holds its advisory lock;
// a read-held or handed-over row (mode 'r', 'v') is no writer's, nor kept.
constexpr char kLive[] =
    "l.expires_at > clock_timestamp() AND (l.owner <> '' OR l.mode IS NULL) "
    "AND CASE WHEN l.session_key IS NULL "
    "THEN true ELSE {F}alive\"(l.session_key) END";

// The last column: whether the holder is live (a session-mode row is, while
// it counts at all), NULL when no liveness protects the hold.
constexpr char kColumns[] =
    "l.owner, l.holds, l.fencing_token, GREATEST(0, extract(epoch FROM "
    "l.expires_at - clock_timestamp()) * 1000000)::bigint, "
    "(extract(epoch FROM l.since) * 1000000)::bigint, "
    "CASE WHEN l.session_key IS NOT NULL THEN true "
    "WHEN l.live_ids IS NOT NULL THEN EXISTS (SELECT 1 FROM {V} v WHERE "
    "v.client = ANY(l.live_ids) AND v.live_until > clock_timestamp()) END";

// A lock's readers go with it; the row is locked first (the delete reads
// `f`), as every function locks it before holder rows.
constexpr char kForce[] = R"sql(
WITH f AS (
  UPDATE {T} AS l SET owner = '', holds = 0, expires_at = clock_timestamp(),
    mode = NULL, claim_owner = NULL, claim_until = NULL, claim_num = NULL
  WHERE l.namespace = $1 AND l.name = $2 AND l.expires_at > clock_timestamp()
  RETURNING 1),
r AS (
  DELETE FROM {H} h WHERE h.namespace = $1 AND h.name = $2
    AND EXISTS (SELECT 1 FROM f))
SELECT pg_notify($3, $1 || ':' || $2)::text FROM f
)sql";

// As kForce, only while the live hold carries the token $4 ({L}: kLive).
constexpr char kForceIfToken[] = R"sql(
WITH f AS (
  UPDATE {T} AS l SET owner = '', holds = 0, expires_at = clock_timestamp()
  WHERE l.namespace = $1 AND l.name = $2 AND l.fencing_token = $4::bigint
    AND {L}
  RETURNING 1)
SELECT pg_notify($3, $1 || ':' || $2)::text FROM f
)sql";

std::string Quote(absl::string_view identifier) {
  return absl::StrCat("\"", identifier, "\"");
}

}  // namespace

// The watchdog's batch: every due renewal of a client in one statement.
extern const char kRenewMany[] = R"sql(
WITH c AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[])
      WITH ORDINALITY AS c(name, owner, lease_ms, i)),
u AS (
  UPDATE {R} AS l SET
    kept_lease_ms = GREATEST(l.kept_lease_ms, c.lease_ms),
    expires_at = GREATEST(l.expires_at, clock_timestamp()
        + GREATEST(l.kept_lease_ms, c.lease_ms) * interval '1 millisecond')
  FROM c
  WHERE l.namespace = $1 AND l.name = c.name AND l.owner = c.owner
    AND l.expires_at > clock_timestamp() {X}
  RETURNING c.i)
SELECT i FROM u
)sql";

void ByNameAndPrefix(const std::string& sql, const std::string& name,
                     Statement& exact, Statement& prefixed) {
  exact = {name + "_inspect",
           absl::StrReplaceAll(sql, {{"{W}", "l.name = $2"}})};
  prefixed = {name + "_list",
              absl::StrReplaceAll(sql, {{"{W}", "starts_with(l.name, $2)"}})};
}

Sql::Sql(const std::string& table) {
  const std::string t = Quote(table);
  const std::string m = Quote(table + "_meta");
  const std::string s = Quote(table + "_fencing");
  const std::string v = Quote(table + "_liveness");
  const std::string h = Quote(table + "_holders");
  // {F}acquire" -> "<table>_s_acquire"
  const std::string f = absl::StrCat("\"", table, "_s_");
  auto fill = [&](absl::string_view text) {
    return absl::StrReplaceAll(text, {{"{T}", t},
                                      {"{M}", m},
                                      {"{S}", s},
                                      {"{F}", f},
                                      {"{V}", v},
                                      {"{H}", h}});
  };
  channel = table + "_released";
  listen = absl::StrCat("LISTEN ", Quote(channel));
  acquire = {"dlock_acquire", fill(kAcquire)};
  release = {"dlock_release", fill(kRelease)};
  renew = {"dlock_renew", fill(kRenew)};
  liveness = {"dlock_liveness", fill(kLiveness)};
  renew_many = {
      "dlock_renew_many",
      fill(absl::StrReplaceAll(kRenewMany, {{"{R}", "{T}"}, {"{X}", ""}}))};
  inspect = {"dlock_inspect",
             fill(absl::StrCat("SELECT ", kColumns,
                               " FROM {T} l WHERE "
                               "l.namespace = $1 AND l.name = $2 AND ",
                               kLive))};
  list = {"dlock_list",
          fill(absl::StrCat("SELECT l.name, ", kColumns,
                            " FROM {T} l WHERE l.namespace = $1 AND "
                            "starts_with(l.name, $2) AND NOT "
                            "starts_with(l.name, E'\\x1f') AND ",
                            kLive, " ORDER BY l.name"))};
  force = {"dlock_force", fill(kForce)};
  force_if_token = {"dlock_force_if_token",
                    fill(absl::StrReplaceAll(kForceIfToken, {{"{L}", kLive}}))};
  sweep = {"dlock_sweep",
           fill("WITH v AS (DELETE FROM {V} WHERE live_until < "
                "clock_timestamp() - interval '10 minutes'), "
                "hd AS (DELETE FROM {H} WHERE expires_at < clock_timestamp() - "
                "interval '10 minutes') "
                "DELETE FROM {T} l WHERE l.expires_at < clock_timestamp() - "
                "interval '10 minutes' AND NOT EXISTS (SELECT 1 FROM {H} h "
                "WHERE h.namespace = l.namespace AND h.name = l.name AND "
                "h.expires_at >= clock_timestamp() - interval '10 minutes')")};
  // The name is a validated identifier: no quote can end the literal.
  memory = {"dlock_memory",
            fill("SELECT pg_total_relation_size('{T}'::regclass)")};
  ping = {"dlock_ping", "SELECT 1"};
  s_release = {"dlock_s_release",
               fill("SELECT {F}release\"($1, $2, $3, $4, $5, $6, $7, $8)")};
  s_renew = {"dlock_s_renew", fill("SELECT {F}renew\"($1, $2, $3, $4, $5)")};
  schema_version = fill("SELECT max(version) FROM {M}");
  create_schema =
      fill(absl::StrCat(kCreate, kSessionSchema, kPrimitivesSchema,
                        kElectionSchema, kReadWriteSchema, kCreateEnd));
  primitives = PrimitiveSql(fill);
}

absl::Status EnsureSchema(PgConn& conn, const Sql& sql) {
  for (int round = 0;; ++round) {
    // 0: no schema yet (the meta table is missing: 42P01).
    int64_t found = 0;
    absl::StatusOr<PgResult> version =
        conn.Run(Statement{"dlock_schema_version", sql.schema_version}, {});
    if (version.ok()) {
      if (PQntuples(version->get()) == 1) found = GetInt(version->get(), 0, 0);
    } else if (version.status().code() != absl::StatusCode::kInternal) {
      // Unavailable, or refused (PermissionDenied naming the grants).
      return version.status();
    }
    if (found > kSchemaVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat(conn.endpoint(), ": the lock table has schema version ",
                       found, ", newer than this dlock understands (",
                       kSchemaVersion, "); upgrade dlock"));
    }
    if (found == kSchemaVersion) return absl::OkStatus();
    if (round > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          conn.endpoint(), ": the lock tables still have schema version ",
          found, " after creating them"));
    }
    // Older (or none): create_schema creates or migrates (ADD COLUMN IF NOT
    // EXISTS, functions replaced) in its serialized transaction.
    absl::Status created =
        conn.Exec(sql.create_schema, "creating the lock tables");
    if (created.ok()) continue;
    // A failed statement leaves the BEGIN block open and aborted.
    conn.Exec("ROLLBACK").IgnoreError();
    if (absl::IsPermissionDenied(created)) {
      return absl::PermissionDeniedError(absl::StrCat(
          created.message(),
          found == 0
              ? "; this user may not create the lock tables: let an "
                "administrator run `dlock setup --backend <their URI> "
                "--grant-to <this user>`"
              : absl::StrCat("; the lock tables have schema version ", found,
                             ", older than this dlock's (", kSchemaVersion,
                             "), and only their owner may migrate them: let "
                             "the owner run `dlock setup --backend <their "
                             "URI>`"),
          " (docs/postgres.md, \"Least privilege\")"));
    }
    if (absl::IsUnavailable(created)) return created;
    return absl::FailedPreconditionError(absl::StrCat(
        conn.endpoint(),
        ": could not create the lock tables: ", created.message()));
  }
}

}  // namespace dlock::postgres
