// Copyright dlock authors. Schema version 7 (issue 24): the semaphore's
// tables, functions and statements, from the validated draft
// (docs/design/validation/postgres_primitives.sql) adapted to version 6's
// tokens (next_token) and to session mode (a per-holder advisory key and
// the grace rule). Placeholders as in pg_schema.cc, with {H} the holders
// table.
#include "absl/strings/str_replace.h"
#include "pg_schema.h"

namespace dlock::postgres {

// Kinds of object share the lock table, each under its own name: a
// semaphore under E'\x1fs' || name (names hold no control character, C15,
// so it never meets a lock's). Its row (owner '', mode 's', lim its N) is
// what every call on it locks first (FOR UPDATE): calls on one semaphore
// are serialised there, and the row keeps N and the head waiter's place
// (claim_owner keeps claim_num permits until claim_until). Its holders are
// rows of {H}. A renewal touches only its holder row, so that no statement
// locks a holder row before the object row (that order would deadlock
// against an acquisition purging the holder); the sweeper keeps object rows
// that still have holders.
//
// Session mode: a holder row carries session_key = hashtextextended(ns /
// qualified name / owner), held as a shared advisory lock by the holder's
// own session, and is purged once its session has been seen gone
// (dead_since) for its grace_ms, as a lock's row is (pg_schema.cc, C19).
extern const char kPrimitivesSchema[] = R"sql(
ALTER TABLE {T} ADD COLUMN IF NOT EXISTS mode "char",
  ADD COLUMN IF NOT EXISTS claim_owner text,
  ADD COLUMN IF NOT EXISTS claim_until timestamptz,
  ADD COLUMN IF NOT EXISTS claim_num bigint,
  ADD COLUMN IF NOT EXISTS lim bigint,
  ADD COLUMN IF NOT EXISTS value bytea;

CREATE TABLE IF NOT EXISTS {H} (
  namespace text NOT NULL,
  name text NOT NULL,
  owner text NOT NULL,
  permits bigint NOT NULL,
  holds bigint NOT NULL,
  fencing_token bigint NOT NULL,
  kept_lease_ms bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  since timestamptz NOT NULL,
  session_key bigint,
  live_ids text[],
  -- A holder's permit slots, each in [0, N): no two live holders share one.
  slots int[] NOT NULL,
  dead_since timestamptz,
  grace_ms bigint,
  PRIMARY KEY (namespace, name, owner)
);

-- Drops the holders of one object whose lease ended, whose clients all
-- lapsed, or whose session has been gone for its grace; the caller holds
-- the object's row lock.
CREATE OR REPLACE FUNCTION {F}purge"(p_ns text, p_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE {H} h SET dead_since = clock_timestamp()
    WHERE h.namespace = p_ns AND h.name = p_name
      AND h.session_key IS NOT NULL AND h.dead_since IS NULL
      AND NOT {F}alive"(h.session_key);
  DELETE FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name
    AND (h.expires_at <= clock_timestamp()
         OR (h.live_ids IS NOT NULL AND NOT {F}any_live"(h.live_ids))
         OR h.dead_since + h.grace_ms * interval '1 millisecond'
            <= clock_timestamp());
END
$fn$;

-- The object row, locked (created free if missing).
CREATE OR REPLACE FUNCTION {F}lock_row"(p_ns text, p_name text)
RETURNS {T} LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T};
BEGIN
  LOOP
    SELECT * INTO v_row FROM {T} l
      WHERE l.namespace = p_ns AND l.name = p_name FOR UPDATE;
    IF FOUND THEN
      RETURN v_row;
    END IF;
    INSERT INTO {T} (namespace, name, owner, holds, fencing_token,
        kept_lease_ms, expires_at, since)
      VALUES (p_ns, p_name, '', 0, 0, 0, clock_timestamp(), clock_timestamp())
      ON CONFLICT DO NOTHING;
  END LOOP;
END
$fn$;

-- How long until one of the object's holders may end (the waiter's hint);
-- NULL without holders.
CREATE OR REPLACE FUNCTION {F}holders_left"(p_ns text, p_name text)
RETURNS bigint LANGUAGE sql AS $fn$
  SELECT GREATEST(0, ceil(extract(epoch FROM min(LEAST(h.expires_at,
      COALESCE((SELECT max(v.live_until) FROM {V} v
                WHERE v.client = ANY(h.live_ids)), h.expires_at),
      COALESCE(h.dead_since + h.grace_ms * interval '1 millisecond',
               h.expires_at)))
      - clock_timestamp()) * 1000))::bigint
  FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name;
$fn$;

-- One hold more for p_owner in {H}: a re-entry, or a fresh hold with a new
-- token in the lowest free slots below p_limit. p_key: session mode's
-- advisory key, taken shared unless the session has it (p_have).
CREATE OR REPLACE FUNCTION {F}hold"(p_ns text, p_name text, p_owner text,
    p_permits bigint, p_limit bigint, p_lease_ms bigint, p_live text,
    p_ttl_ms bigint, p_key bigint, p_have boolean, p_grace_ms bigint,
    OUT o_token bigint, OUT o_holds bigint, OUT o_expires timestamptz,
    OUT o_slots int[])
LANGUAGE plpgsql AS $fn$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_end timestamptz := v_now + p_lease_ms * interval '1 millisecond';
BEGIN
  UPDATE {H} h SET holds = h.holds + 1,
      kept_lease_ms = GREATEST(h.kept_lease_ms, p_lease_ms),
      expires_at = GREATEST(h.expires_at, v_end),
      dead_since = NULL, grace_ms = GREATEST(h.grace_ms, p_grace_ms),
      live_ids = CASE WHEN p_ttl_ms = 0 OR h.live_ids IS NULL THEN NULL
                      WHEN p_live = ANY(h.live_ids) THEN h.live_ids
                      ELSE h.live_ids || p_live END
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
    RETURNING h.fencing_token, h.holds, h.expires_at, h.slots
    INTO o_token, o_holds, o_expires, o_slots;
  IF NOT FOUND THEN
    INSERT INTO {H} (namespace, name, owner, permits, holds, fencing_token,
        kept_lease_ms, expires_at, since, session_key, grace_ms, live_ids,
        slots)
      VALUES (p_ns, p_name, p_owner, p_permits, 1, {F}next_token"(),
        p_lease_ms, v_end, v_now, p_key, p_grace_ms,
        CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END,
        ARRAY(SELECT x FROM generate_series(0, p_limit - 1) x
              WHERE NOT EXISTS (SELECT 1 FROM {H} h
                                WHERE h.namespace = p_ns
                                  AND h.name = p_name AND x = ANY(h.slots))
              ORDER BY x LIMIT p_permits))
      RETURNING fencing_token, holds, expires_at, slots
      INTO o_token, o_holds, o_expires, o_slots;
  END IF;
  IF p_key IS NOT NULL AND NOT p_have THEN
    PERFORM pg_advisory_lock_shared(p_key);
  END IF;
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
END
$fn$;

-- Semaphores (C22). o_code: 1 granted (token, holds, slots); 0 refused
-- (o_left: ms until a holder or the kept place may end, NULL unknown); -2
-- another N in force (o_token: that N); -3 a re-entry asking other permits
-- (o_token: the permits held). A refused waiter (p_wait) marks the row
-- wanted, and the first one keeps a place for its permits for p_reserve_ms.
-- Session mode (p_session): the holder's key; p_have when the statement
-- runs on the session that holds it (a re-entry).
CREATE OR REPLACE FUNCTION {F}sem_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint, p_limit bigint, p_permits bigint, p_reserve_ms bigint,
    p_session boolean, p_have boolean, p_grace_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint,
               o_slots int[])
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_key bigint := CASE WHEN p_session THEN
      hashtextextended(p_ns || '/' || p_name || '/' || p_owner, 0) END;
  v_now timestamptz := clock_timestamp();
  v_count bigint;
  v_used bigint;
  v_claim boolean := COALESCE(v_row.claim_until > v_now, false);
  v_reserved bigint := 0;
  v_mine bigint;
  v_hold record;
BEGIN
  PERFORM {F}purge"(p_ns, p_name);
  SELECT count(*), COALESCE(sum(h.permits), 0) INTO v_count, v_used
    FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name;
  SELECT h.permits INTO v_mine FROM {H} h
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
  IF p_have AND v_mine IS NULL THEN
    -- The session's hold was lost: its shared lock goes first.
    PERFORM pg_advisory_unlock_shared(v_key);
    p_have := false;
  END IF;
  IF v_count = 0 AND NOT v_claim THEN
    v_row.lim := p_limit;  -- nothing in force: the caller's N
  ELSIF v_row.lim IS DISTINCT FROM p_limit THEN
    RETURN QUERY SELECT -2, v_row.lim, 0::bigint, 0::bigint, NULL::int[];
    RETURN;
  END IF;
  IF v_mine IS NOT NULL AND v_mine <> p_permits THEN
    RETURN QUERY SELECT -3, v_mine, 0::bigint, 0::bigint, NULL::int[];
    RETURN;
  END IF;
  -- Room for the caller, leaving the head waiter's place whole unless the
  -- caller is that waiter (a waiter for many permits is not starved).
  IF v_claim AND v_row.claim_owner <> p_owner THEN
    v_reserved := v_row.claim_num;
  END IF;
  IF v_mine IS NOT NULL OR v_used + p_permits + v_reserved <= v_row.lim THEN
    v_hold := {F}hold"(p_ns, p_name, p_owner, p_permits, v_row.lim,
                       p_lease_ms, p_live, p_ttl_ms, v_key, p_have,
                       p_grace_ms);
    UPDATE {T} l SET mode = 's', lim = v_row.lim,
        expires_at = GREATEST(l.expires_at, v_hold.o_expires),
        claim_owner = CASE WHEN l.claim_owner = p_owner THEN NULL
                           ELSE l.claim_owner END,
        claim_num = CASE WHEN l.claim_owner = p_owner THEN NULL
                         ELSE l.claim_num END,
        claim_until = CASE WHEN l.claim_owner = p_owner THEN NULL
                           ELSE l.claim_until END
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 1, v_hold.o_token, v_hold.o_holds, 0::bigint,
        v_hold.o_slots;
    RETURN;
  END IF;
  IF p_wait THEN
    -- The first waiter (or the one keeping the place) keeps its permits.
    UPDATE {T} l SET mode = 's', lim = v_row.lim, wanted = true,
        claim_owner = CASE WHEN v_claim THEN l.claim_owner ELSE p_owner END,
        claim_num = CASE WHEN v_claim AND l.claim_owner <> p_owner
                         THEN l.claim_num ELSE p_permits END,
        claim_until = CASE WHEN v_claim AND l.claim_owner <> p_owner
            THEN l.claim_until
            ELSE v_now + p_reserve_ms * interval '1 millisecond' END
      WHERE l.namespace = p_ns AND l.name = p_name;
    UPDATE {T} l SET expires_at = GREATEST(l.expires_at, l.claim_until)
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  RETURN QUERY SELECT 0, 0::bigint, 0::bigint,
      LEAST({F}holders_left"(p_ns, p_name), CASE WHEN v_claim AND
          v_row.claim_owner <> p_owner THEN GREATEST(0, ceil(extract(epoch
          FROM v_row.claim_until - v_now) * 1000))::bigint END), NULL::int[];
END
$fn$;

-- Takes p_holds holds of p_owner off one object's holders (more than held:
-- all), once the caller locked its row: the holds left, NULL when the owner
-- holds nothing live there; at zero its holder row is gone, and its session
-- (p_have) lets go of its key. Semaphores' and readers' releases.
CREATE OR REPLACE FUNCTION {F}take_off"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_have boolean)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_left bigint;
BEGIN
  PERFORM {F}purge"(p_ns, p_name);
  UPDATE {H} h SET holds = h.holds - p_holds
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
    RETURNING GREATEST(h.holds, 0) INTO v_left;
  IF v_left = 0 THEN
    DELETE FROM {H} h
      WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
  END IF;
  IF p_have AND COALESCE(v_left, 0) = 0 THEN
    PERFORM pg_advisory_unlock_shared(
        hashtextextended(p_ns || '/' || p_name || '/' || p_owner, 0));
  END IF;
  RETURN v_left;
END
$fn$;

-- Takes p_holds holds of p_owner off (more than held: all). Returns the
-- holds left, NULL when the owner holds nothing live here (C4). A release
-- with waiters is announced. p_have: the holder's session, which lets go
-- of its key with its last hold (or a hold found gone).
CREATE OR REPLACE FUNCTION {F}sem_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_channel text, p_have boolean)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_left bigint := {F}take_off"(p_ns, p_name, p_owner, p_holds, p_have);
BEGIN
  IF v_left IS DISTINCT FROM 0 THEN
    RETURN v_left;  -- NULL: the owner holds nothing live here
  END IF;
  UPDATE {T} l SET wanted = false, expires_at = GREATEST(clock_timestamp(),
      (SELECT max(h.expires_at) FROM {H} h
       WHERE h.namespace = p_ns AND h.name = p_name),
      CASE WHEN l.claim_until > clock_timestamp() THEN l.claim_until END)
    WHERE l.namespace = p_ns AND l.name = p_name;
  IF v_row.wanted THEN
    PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
  END IF;
  RETURN 0;
END
$fn$;

-- A holder's renewal: true when renewed. Pooled (not p_have), a session
-- holder counts only while some session holds its key; on its own session
-- a hold found gone lets go of the key.
CREATE OR REPLACE FUNCTION {F}holder_renew"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_have boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE {H} h SET kept_lease_ms = GREATEST(h.kept_lease_ms, p_lease_ms),
      expires_at = GREATEST(h.expires_at, clock_timestamp()
          + GREATEST(h.kept_lease_ms, p_lease_ms) * interval '1 millisecond')
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
      AND h.expires_at > clock_timestamp()
      AND (h.live_ids IS NULL OR {F}any_live"(h.live_ids))
      AND (p_have OR h.session_key IS NULL OR {F}alive"(h.session_key));
  IF FOUND THEN
    RETURN true;
  END IF;
  IF p_have THEN
    PERFORM pg_advisory_unlock_shared(
        hashtextextended(p_ns || '/' || p_name || '/' || p_owner, 0));
  END IF;
  RETURN false;
END
$fn$;

-- Every holder of one object removed (p_token NULL), or the one holding
-- p_token: whether one was; waiters are woken.
CREATE OR REPLACE FUNCTION {F}holders_force"(p_ns text, p_name text,
    p_token bigint, p_channel text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_found boolean;
BEGIN
  PERFORM {F}purge"(p_ns, p_name);
  DELETE FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name
    AND (p_token IS NULL OR h.fencing_token = p_token);
  v_found := FOUND;
  IF p_token IS NULL THEN
    UPDATE {T} l SET claim_owner = NULL, claim_until = NULL,
        claim_num = NULL, wanted = false, expires_at = clock_timestamp()
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  IF v_found OR p_token IS NULL THEN
    PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
  END IF;
  RETURN v_found;
END
$fn$;
-- Multi-locks (C25), lease mode: every name or none, in one transaction.
-- The rows are locked in one global order (COLLATE "C"), so two calls never
-- wait on each other in a cycle; all are checked, then all taken (fresh
-- holds with one new token, re-entries keeping theirs), as the acquire
-- statement takes one. Granted: a row per name (1, 0, 0, name, token,
-- holds). Refused: one row (0, the 1-based position in p_names of a name
-- another owner holds, the ms until its holder may end), that row marked
-- wanted so that its release wakes us; nothing else changed.
CREATE OR REPLACE FUNCTION {F}acquire_all"(p_ns text, p_names text[],
    p_owner text, p_lease_ms bigint, p_live text, p_ttl_ms bigint)
RETURNS TABLE (o_code int, o_index int, o_left bigint, o_name text,
               o_token bigint, o_holds bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_name text;
  v_row {T};
  v_now timestamptz;
  v_token bigint;
BEGIN
  FOR v_name IN SELECT n FROM unnest(p_names) n ORDER BY n COLLATE "C" LOOP
    v_row := {F}lock_row"(p_ns, v_name);
    v_now := clock_timestamp();
    IF v_row.owner <> p_owner AND v_row.expires_at > v_now
        AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids)) THEN
      UPDATE {T} l SET wanted = true
        WHERE l.namespace = p_ns AND l.name = v_name;
      RETURN QUERY SELECT 0, array_position(p_names, v_name),
          GREATEST(0, ceil(extract(epoch FROM LEAST(v_row.expires_at,
              (SELECT max(v.live_until) FROM {V} v
               WHERE v.client = ANY(v_row.live_ids))) - v_now) * 1000))::bigint,
          NULL::text, NULL::bigint, NULL::bigint;
      RETURN;
    END IF;
  END LOOP;
  v_now := clock_timestamp();
  v_token := {F}next_token"();
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
  RETURN QUERY WITH t AS (
    UPDATE {T} l SET
      holds = CASE WHEN d.again THEN l.holds + 1 ELSE 1 END,
      fencing_token = CASE WHEN d.again THEN l.fencing_token ELSE v_token END,
      kept_lease_ms = CASE WHEN d.again
          THEN GREATEST(l.kept_lease_ms, p_lease_ms) ELSE p_lease_ms END,
      expires_at = CASE WHEN d.again
          THEN GREATEST(l.expires_at,
                        v_now + p_lease_ms * interval '1 millisecond')
          ELSE v_now + p_lease_ms * interval '1 millisecond' END,
      since = CASE WHEN d.again THEN l.since ELSE v_now END,
      session_key = CASE WHEN d.again THEN l.session_key END,
      wanted = d.again AND l.wanted,
      -- A read-write lock's mode and intent end with a lapsed hold taken.
      mode = CASE WHEN d.again THEN l.mode END,
      claim_owner = CASE WHEN d.again THEN l.claim_owner END,
      claim_until = CASE WHEN d.again THEN l.claim_until END,
      live_ids = CASE WHEN p_ttl_ms = 0 THEN NULL
                      WHEN NOT d.again THEN ARRAY[p_live]
                      WHEN l.live_ids IS NULL OR p_live = ANY(l.live_ids)
                        THEN l.live_ids
                      ELSE l.live_ids || p_live END,
      owner = p_owner
    FROM (SELECT l2.name, l2.owner = p_owner AND l2.expires_at > v_now AS again
          FROM {T} l2
          WHERE l2.namespace = p_ns AND l2.name = ANY(p_names)) d
    WHERE l.namespace = p_ns AND l.name = d.name
    RETURNING l.name, l.fencing_token, l.holds)
  SELECT 1, 0, 0::bigint, t.name, t.fencing_token, t.holds FROM t;
END
$fn$;
)sql";

namespace {

// The parts of an object's holders read for Inspect and List: the object's
// name (without its kind's mark), N, the live place, then one holder per
// row (NULL columns when none).
constexpr char kHolders[] = R"sql(
SELECT substr(l.name, 3), l.lim,
  CASE WHEN l.claim_until > clock_timestamp() THEN l.claim_owner END,
  l.claim_num, h.owner, h.holds, h.fencing_token,
  GREATEST(0, extract(epoch FROM h.expires_at - clock_timestamp())
              * 1000000)::bigint,
  (extract(epoch FROM h.since) * 1000000)::bigint, h.slots::text,
  CASE WHEN h.session_key IS NOT NULL THEN true
       WHEN h.live_ids IS NOT NULL THEN true END
FROM {T} l LEFT JOIN {H} h ON h.namespace = l.namespace AND h.name = l.name
  AND h.expires_at > clock_timestamp()
  AND (h.live_ids IS NULL OR {F}any_live"(h.live_ids))
  AND (h.session_key IS NULL OR {F}alive"(h.session_key))
WHERE l.namespace = $1 AND {W}
ORDER BY l.name, h.fencing_token
)sql";

// A waiter that gives up leaves no place behind, and the next waiter looks
// again; a lock handed over to a writer that gave up is free.
constexpr char kGiveUpPlace[] = R"sql(
WITH g AS (
  UPDATE {T} AS l SET claim_owner = NULL, claim_until = NULL, claim_num = NULL,
    expires_at = CASE WHEN l.mode = 'v' THEN clock_timestamp()
                      ELSE l.expires_at END,
    mode = CASE WHEN l.mode = 'v' THEN NULL ELSE l.mode END
  WHERE l.namespace = $1 AND l.name = $2 AND l.claim_owner = $3
  RETURNING 1)
SELECT pg_notify($4, $1 || ':' || $2)::text FROM g
)sql";

}  // namespace

PrimitiveSql::PrimitiveSql(
    const std::function<std::string(absl::string_view)>& fill) {
  sem_acquire = {"dlock_sem_acquire",
                 fill("SELECT * FROM {F}sem_acquire\"($1, $2, $3, $4, $5, "
                      "$6, $7, $8, $9, $10, $11, $12, $13)")};
  sem_release = {"dlock_sem_release",
                 fill("SELECT {F}sem_release\"($1, $2, $3, $4, $5, $6)")};
  holder_renew = {"dlock_holder_renew",
                  fill("SELECT {F}holder_renew\"($1, $2, $3, $4, $5)")};
  // The holder rows of a semaphore: a holder whose clients lapsed is not
  // renewed.
  holder_renew_many = {
      "dlock_holder_renew_many",
      fill(absl::StrReplaceAll(
          kRenewMany,
          {{"{R}", "{H}"},
           {"{X}", "AND (l.live_ids IS NULL OR {F}any_live\"(l.live_ids))"}}))};
  give_up_place = {"dlock_give_up_place", fill(kGiveUpPlace)};
  holders_force = {"dlock_holders_force",
                   fill("SELECT {F}holders_force\"($1, $2, "
                        "NULLIF($3, '')::bigint, $4)")};
  FillElections(fill);
  FillReadWrite(fill);
  acquire_all = {"dlock_acquire_all",
                 fill("SELECT * FROM {F}acquire_all\"($1, $2::text[], $3, $4, "
                      "$5, $6)")};
  ByNameAndPrefix(fill(kHolders), "dlock_holders", holders_inspect,
                  holders_list);
}

}  // namespace dlock::postgres
