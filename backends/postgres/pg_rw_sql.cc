// Copyright dlock authors. Schema version 8: read-write locks (C23), from
// the validated draft (docs/design/validation/postgres_primitives.sql)
// adapted to version 7's holders (hold, purge, a reader's session key) and
// version 6's tokens. Placeholders as in pg_schema.cc.
#include "absl/strings/str_replace.h"
#include "pg_schema.h"

namespace dlock::postgres {

// A lock's row says, with `mode`, what a row with owner '' is: NULL free or
// kept after release; 'r' read-held, its readers rows of {H} (expires_at
// the latest of their leases, live_ids the union of their clients, NULL
// when one of them has no liveness), so that the writer's usual acquire
// statement waits for them, or takes over once they all lapsed; 'v' handed
// by the last reader to the waiting writer claim_owner until claim_until,
// refused to everyone else. 'w' marks a writer (owner set) that reads too,
// so that its release keeps the read (write_release). A waiting writer's
// intent is the claim (claim_owner until claim_until): no new reader gets
// in while it lives (C23's bound on writer starvation); claim_num is 1 once
// a reader was refused, so that the writer's release announces itself.
//
// Every function locks the lock row first (lock_row), then holder rows, as
// the semaphore's do; a reader's renewal too, since it moves the row's
// expiry: the other order deadlocks against an acquisition purging it.
extern const char kReadWriteSchema[] = R"sql(
-- The read-held row's expiry and liveness from its readers.
CREATE OR REPLACE FUNCTION {F}mark_readers"(p_ns text, p_name text)
RETURNS void LANGUAGE sql AS $fn$
  UPDATE {T} l SET owner = '', holds = 0, mode = 'r', session_key = NULL,
      dead_since = NULL, expires_at = r.latest, live_ids = r.ids
    FROM (SELECT max(h.expires_at) AS latest,
                 CASE WHEN bool_and(h.live_ids IS NOT NULL) THEN
                   ARRAY(SELECT DISTINCT unnest(h2.live_ids) FROM {H} h2
                         WHERE h2.namespace = p_ns AND h2.name = p_name)
                 END AS ids
          FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name) r
    WHERE l.namespace = p_ns AND l.name = p_name;
$fn$;

-- o_code 1 granted, 0 refused (o_left: ms until the holder or the writer's
-- intent may end). A refused waiter (p_wait) marks the row wanted.
CREATE OR REPLACE FUNCTION {F}read_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint, p_session boolean, p_have boolean, p_grace_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_key bigint := CASE WHEN p_session THEN
      hashtextextended(p_ns || '/' || p_name || '/' || p_owner, 0) END;
  v_now timestamptz := clock_timestamp();
  v_writer boolean := v_row.owner <> '' AND v_row.expires_at > v_now
      AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids))
      AND (v_row.session_key IS NULL OR {F}alive"(v_row.session_key));
  v_hold record;
BEGIN
  IF v_writer AND v_row.owner = p_owner THEN
    -- The writer reads too, with its token; the row lives as long as the
    -- read, and the write's release keeps the read ('w').
    v_hold := {F}hold"(p_ns, p_name, p_owner, 1, NULL, p_lease_ms, p_live,
                       p_ttl_ms, v_key, p_have, p_grace_ms);
    UPDATE {H} h SET fencing_token = v_row.fencing_token
      WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
    UPDATE {T} l SET mode = 'w',
        expires_at = GREATEST(l.expires_at, v_hold.o_expires)
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 1, v_row.fencing_token, v_hold.o_holds, 0::bigint;
    RETURN;
  END IF;
  IF v_writer OR (v_row.expires_at > v_now
                  AND v_row.mode IS DISTINCT FROM 'r') THEN
    -- A writer, a lock kept after release, or one handed to a writer.
    IF p_wait THEN
      UPDATE {T} l SET wanted = true
        WHERE l.namespace = p_ns AND l.name = p_name;
    END IF;
    RETURN QUERY SELECT 0, 0::bigint, 0::bigint, GREATEST(0, ceil(extract(
        epoch FROM v_row.expires_at - v_now) * 1000))::bigint;
    RETURN;
  END IF;
  PERFORM {F}purge"(p_ns, p_name);
  IF v_row.claim_until > v_now AND v_row.claim_owner <> p_owner
      AND NOT EXISTS (SELECT 1 FROM {H} h WHERE h.namespace = p_ns
                      AND h.name = p_name AND h.owner = p_owner) THEN
    -- A writer waits for the readers there now: no new one.
    UPDATE {T} l SET claim_num = 1, wanted = l.wanted OR p_wait
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 0, 0::bigint, 0::bigint, GREATEST(0, ceil(extract(
        epoch FROM v_row.claim_until - v_now) * 1000))::bigint;
    RETURN;
  END IF;
  v_hold := {F}hold"(p_ns, p_name, p_owner, 1, NULL, p_lease_ms, p_live,
                     p_ttl_ms, v_key, p_have, p_grace_ms);
  IF v_row.mode IS DISTINCT FROM 'r' THEN
    UPDATE {T} l SET since = v_now, claim_owner = NULL, claim_until = NULL,
        claim_num = NULL
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  PERFORM {F}mark_readers"(p_ns, p_name);
  RETURN QUERY SELECT 1, v_hold.o_token, v_hold.o_holds, 0::bigint;
END
$fn$;

-- Takes p_holds reads of p_owner off. Returns the holds left, NULL when the
-- owner reads nothing live here (C4). The last reader hands the lock to a
-- waiting writer ('v'), or frees it.
CREATE OR REPLACE FUNCTION {F}read_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_channel text, p_have boolean)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_left bigint := {F}take_off"(p_ns, p_name, p_owner, p_holds, p_have);
BEGIN
  IF v_left IS DISTINCT FROM 0 THEN
    RETURN v_left;
  END IF;
  IF v_row.owner <> '' THEN
    -- The writer's own read ended; its write goes on.
    UPDATE {T} l SET mode = NULL WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN 0;
  END IF;
  IF EXISTS (SELECT 1 FROM {H} h
             WHERE h.namespace = p_ns AND h.name = p_name) THEN
    PERFORM {F}mark_readers"(p_ns, p_name);
    RETURN 0;
  END IF;
  IF v_row.claim_until > clock_timestamp() THEN
    UPDATE {T} l SET mode = 'v', expires_at = l.claim_until, live_ids = NULL,
        wanted = true
      WHERE l.namespace = p_ns AND l.name = p_name;
    PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
  ELSE
    UPDATE {T} l SET mode = NULL, expires_at = clock_timestamp(),
        live_ids = NULL, wanted = false
      WHERE l.namespace = p_ns AND l.name = p_name;
    IF v_row.wanted THEN
      PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
    END IF;
  END IF;
  RETURN 0;
END
$fn$;

-- A reader's renewal: the lock row first, then the holder row, then the
-- row's expiry (see above). True when renewed.
CREATE OR REPLACE FUNCTION {F}read_renew"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_have boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_end timestamptz;
BEGIN
  IF NOT {F}holder_renew"(p_ns, p_name, p_owner, p_lease_ms, p_have) THEN
    RETURN false;
  END IF;
  SELECT h.expires_at INTO v_end FROM {H} h
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
  UPDATE {T} l SET expires_at = GREATEST(l.expires_at, v_end)
    WHERE l.namespace = p_ns AND l.name = p_name AND l.mode IN ('r', 'w');
  RETURN true;
END
$fn$;

-- A writer that the usual acquire statement refused on a row of mode 'r'
-- or 'v' asks here (one round trip more, only then): the hand-off, the
-- upgrade refusal, and the intent that stops new readers (p_intent_ms,
-- renewed by each attempt of the wait). o_code 1 granted, 0 refused
-- (o_left), -4 the owner reads this lock (no upgrade). Session mode
-- (s_write_acquire): p_key, the key the writer's session then holds, and
-- its grace.
CREATE OR REPLACE FUNCTION {F}write_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint, p_intent_ms bigint, p_key bigint, p_grace_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_now timestamptz := clock_timestamp();
  v_token bigint;
  v_live boolean;
BEGIN
  -- Live: read-held, handed over, kept, or another writer's (it took the
  -- row since the statement that sent us here).
  v_live := v_row.expires_at > v_now
      AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids))
      AND (v_row.session_key IS NULL OR {F}alive"(v_row.session_key));
  IF v_row.mode = 'r' AND v_live THEN
    PERFORM {F}purge"(p_ns, p_name);
    IF EXISTS (SELECT 1 FROM {H} h WHERE h.namespace = p_ns
               AND h.name = p_name AND h.owner = p_owner) THEN
      RETURN QUERY SELECT -4, 0::bigint, 0::bigint, 0::bigint;
      RETURN;
    END IF;
    v_live := EXISTS (SELECT 1 FROM {H} h
                      WHERE h.namespace = p_ns AND h.name = p_name);
  END IF;
  -- (NULL-safe: a row of no mode is not handed to us; the draft's plain
  -- NOT (...) was NULL there, and granted a live writer's row.)
  IF v_live AND NOT COALESCE(v_row.mode = 'v' AND v_row.claim_owner = p_owner,
                             false) THEN
    IF p_wait AND v_row.mode = 'r' AND (v_row.claim_until IS NULL
        OR v_row.claim_until <= v_now OR v_row.claim_owner = p_owner) THEN
      UPDATE {T} l SET wanted = true, claim_owner = p_owner,
          claim_until = v_now + p_intent_ms * interval '1 millisecond',
          claim_num = CASE WHEN l.claim_owner = p_owner
                           AND l.claim_until > v_now THEN l.claim_num
                           ELSE 0 END
        WHERE l.namespace = p_ns AND l.name = p_name;
    ELSIF p_wait THEN
      UPDATE {T} l SET wanted = true
        WHERE l.namespace = p_ns AND l.name = p_name;
    END IF;
    RETURN QUERY SELECT 0, 0::bigint, 0::bigint, LEAST(
        {F}holders_left"(p_ns, p_name), GREATEST(0, ceil(extract(epoch FROM
        v_row.expires_at - v_now) * 1000))::bigint);
    RETURN;
  END IF;
  -- Free (the readers gone), or handed to us.
  DELETE FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name;
  UPDATE {T} l SET owner = p_owner, holds = 1, mode = NULL,
      fencing_token = {F}next_token"(), kept_lease_ms = p_lease_ms,
      expires_at = v_now + p_lease_ms * interval '1 millisecond',
      since = v_now, session_key = p_key, dead_since = NULL,
      grace_ms = p_grace_ms,
      wanted = COALESCE(l.mode = 'v' AND l.claim_num > 0, false),
      claim_owner = NULL, claim_until = NULL, claim_num = NULL,
      live_ids = CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END
    WHERE l.namespace = p_ns AND l.name = p_name
    RETURNING l.fencing_token INTO v_token;
  IF p_key IS NOT NULL THEN
    PERFORM pg_advisory_lock_shared(p_key);
  END IF;
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
  RETURN QUERY SELECT 1, v_token, 1::bigint, 0::bigint;
END
$fn$;

-- The release of a writer's write holds on a row of mode 'w' (the usual
-- release statement leaves such rows alone, and the client asks here when
-- it answered nothing): the writer's reads stay, read-held (a downgrade).
-- Returns the write holds left, NULL when the owner does not hold it.
CREATE OR REPLACE FUNCTION {F}write_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_channel text)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
BEGIN
  IF v_row.owner <> p_owner OR v_row.expires_at <= clock_timestamp() THEN
    RETURN NULL;
  ELSIF v_row.holds > p_holds THEN
    UPDATE {T} l SET holds = l.holds - p_holds
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN v_row.holds - p_holds;
  END IF;
  PERFORM {F}purge"(p_ns, p_name);
  IF EXISTS (SELECT 1 FROM {H} h
             WHERE h.namespace = p_ns AND h.name = p_name) THEN
    PERFORM {F}mark_readers"(p_ns, p_name);
  ELSE
    UPDATE {T} l SET owner = '', holds = 0, mode = NULL, live_ids = NULL,
        expires_at = clock_timestamp()
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
  RETURN 0;
END
$fn$;

-- Session mode: the writer's acquire. On a read-held or handed-over row,
-- write_acquire with the writer's session key (its row then belongs to its
-- session, as s_acquire's); on a row of a writer that reads ('w'), its
-- readers must be gone first; otherwise s_acquire. The answer as
-- write_acquire's.
CREATE OR REPLACE FUNCTION {F}s_write_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_have boolean, p_grace_ms bigint,
    p_wait boolean, p_intent_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_key bigint := hashtextextended(p_ns || '/' || p_name, 0);
BEGIN
  IF v_row.mode = 'w' AND v_row.owner <> p_owner THEN
    PERFORM {F}purge"(p_ns, p_name);
    IF EXISTS (SELECT 1 FROM {H} h
               WHERE h.namespace = p_ns AND h.name = p_name) THEN
      IF p_wait THEN
        UPDATE {T} l SET wanted = true
          WHERE l.namespace = p_ns AND l.name = p_name;
      END IF;
      RETURN QUERY SELECT 0, 0::bigint, 0::bigint,
          {F}holders_left"(p_ns, p_name);
      RETURN;
    END IF;
    UPDATE {T} l SET mode = NULL WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  IF v_row.mode IS DISTINCT FROM 'r' AND v_row.mode IS DISTINCT FROM 'v' THEN
    RETURN QUERY SELECT CASE WHEN a.o_got THEN 1 ELSE 0 END, a.o_token,
        a.o_holds, a.o_left
      FROM {F}acquire"(p_ns, p_name, p_owner, p_lease_ms, p_have,
                       p_grace_ms) a;
    RETURN;
  END IF;
  IF p_have THEN
    -- Our session's lock is stale (readers hold the row now).
    PERFORM pg_advisory_unlock_shared(v_key);
  END IF;
  RETURN QUERY SELECT * FROM {F}write_acquire"(p_ns, p_name, p_owner,
      p_lease_ms, p_wait, '', 0, p_intent_ms, v_key, p_grace_ms);
END
$fn$;

-- Session mode: the writer's release; one that also reads keeps its read
-- (write_release), and its session lets go of the row's key as s_release
-- does.
CREATE OR REPLACE FUNCTION {F}s_write_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_have boolean, p_keep boolean,
    p_channel text, p_keep_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_left bigint;
BEGIN
  IF v_row.mode IS DISTINCT FROM 'w' OR v_row.owner <> p_owner THEN
    RETURN {F}release"(p_ns, p_name, p_owner, p_holds, p_have, p_keep,
                       p_channel, p_keep_ms);
  END IF;
  v_left := {F}write_release"(p_ns, p_name, p_owner, p_holds, p_channel);
  IF p_have AND (COALESCE(v_left, 0) = 0 OR NOT p_keep) THEN
    PERFORM pg_advisory_unlock_shared(
        hashtextextended(p_ns || '/' || p_name, 0));
  END IF;
  RETURN v_left;
END
$fn$;
)sql";

namespace {

// A lock's writer, readers and waiting writer, read in one statement: the
// row's columns (owner, holds, token, left us, since us, live, mode, the
// live intent's owner, handed over), then one reader per row (NULL columns
// when none: owner, holds, token, left us, since us, live).
constexpr char kReaders[] = R"sql(
SELECT l.owner, l.holds, l.fencing_token,
  GREATEST(0, extract(epoch FROM l.expires_at - clock_timestamp())
              * 1000000)::bigint,
  (extract(epoch FROM l.since) * 1000000)::bigint,
  CASE WHEN l.session_key IS NOT NULL THEN true
       WHEN l.live_ids IS NOT NULL THEN EXISTS (SELECT 1 FROM {V} v
         WHERE v.client = ANY(l.live_ids)
           AND v.live_until > clock_timestamp()) END,
  l.mode,
  CASE WHEN l.claim_until > clock_timestamp() THEN l.claim_owner END,
  l.mode = 'v',
  h.owner, h.holds, h.fencing_token,
  GREATEST(0, extract(epoch FROM h.expires_at - clock_timestamp())
              * 1000000)::bigint,
  (extract(epoch FROM h.since) * 1000000)::bigint,
  CASE WHEN h.session_key IS NOT NULL OR h.live_ids IS NOT NULL
       THEN true END,
  l.expires_at > clock_timestamp()
    AND (l.live_ids IS NULL OR {F}any_live"(l.live_ids))
    AND (l.session_key IS NULL OR {F}alive"(l.session_key)),
  l.name
FROM {T} l LEFT JOIN {H} h ON h.namespace = l.namespace AND h.name = l.name
  AND h.expires_at > clock_timestamp()
  AND (h.live_ids IS NULL OR {F}any_live"(h.live_ids))
  AND (h.session_key IS NULL OR {F}alive"(h.session_key))
WHERE l.namespace = $1 AND {WHICH}
ORDER BY l.name, h.fencing_token
)sql";

}  // namespace

void PrimitiveSql::FillReadWrite(
    const std::function<std::string(absl::string_view)>& fill) {
  read_acquire = {"dlock_read_acquire",
                  fill("SELECT * FROM {F}read_acquire\"($1, $2, $3, $4, $5, "
                       "$6, $7, $8, $9, $10)")};
  read_release = {"dlock_read_release",
                  fill("SELECT {F}read_release\"($1, $2, $3, $4, $5, $6)")};
  read_renew = {"dlock_read_renew",
                fill("SELECT {F}read_renew\"($1, $2, $3, $4, $5)")};
  write_acquire = {"dlock_write_acquire",
                   fill("SELECT * FROM {F}write_acquire\"($1, $2, $3, $4, $5, "
                        "$6, $7, $8, NULL, NULL)")};
  write_release = {"dlock_write_release",
                   fill("SELECT {F}write_release\"($1, $2, $3, $4, $5)")};
  readers_inspect = {
      "dlock_readers_inspect",
      fill(absl::StrReplaceAll(kReaders, {{"{WHICH}", "l.name = $2"}}))};
  // The locks' rows only (objects' names start with \x1f), live: a
  // writer's, kept, read-held or handed over.
  readers_list = {
      "dlock_readers_list",
      fill(absl::StrReplaceAll(
          kReaders, {{"{WHICH}",
                      "starts_with(l.name, $2) AND NOT starts_with(l.name, "
                      "E'\\x1f') AND l.expires_at > clock_timestamp()"}}))};
  s_write_acquire = {"dlock_s_write_acquire",
                     fill("SELECT * FROM {F}s_write_acquire\"($1, $2, $3, $4, "
                          "$5, $6, $7, $8)")};
  s_write_release = {"dlock_s_write_release",
                     fill("SELECT {F}s_write_release\"($1, $2, $3, $4, $5, "
                          "$6, $7, $8)")};
}

}  // namespace dlock::postgres
