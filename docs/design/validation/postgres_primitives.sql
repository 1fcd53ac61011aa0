-- THE VALIDATION COPY. Everything below is now in the product (schema
-- versions 7 and 8: backends/postgres/pg_primitives_sql.cc,
-- pg_election_sql.cc, pg_rw_sql.cc), adapted to version 6's tokens and to
-- session mode; the product is the reference. This draft stays as the
-- input of postgres_primitives.py, the evidence the design rests on; keep
-- it in step only where a fix changes what was validated (as the NULL-safe
-- hand-off test of write_acquire below).
--
-- Schema version 6 for issue 24 (docs/design/primitives.md, PostgreSQL):
-- lease mode's functions for semaphores, read-write locks, elections and
-- multi-locks, with the placeholders of backends/postgres/pg_schema.cc
-- ({T} the lock table, {S} the fencing sequence, {V} the liveness table,
-- {F} the function prefix) and {H} for the new holders table. Run after
-- version 5's kCreate, in its serialized transaction, when wired. Validated
-- by postgres_primitives.py against a throwaway cluster.
--
-- Kinds of object share the lock table, each under its own name space:
-- a lock (and its writer) under the name as given, a semaphore under
-- E'\x1fs' || name, an election under E'\x1fe' || name (names never hold
-- control characters, C15, so these never meet a lock's name). A row's
-- `mode` says what a row with owner '' is:
--   NULL  free, or kept after release (version 5)
--   'r'   read-held: its readers are rows of {H}; expires_at the latest of
--         their leases, live_ids the union of their clients (NULL when one
--         of them has no liveness), so that a writer's acquire (unchanged)
--         waits for them, or takes over when all of them lapsed
--   'v'   handed by the last reader to the waiting writer claim_owner, until
--         claim_until (= expires_at); refused to everyone else
--   's'   a semaphore: its holders are rows of {H}
-- and 'w' marks a writer (owner set) that holds a read lock too, so that
-- its release keeps the read (write_release below). A writer's intent and
-- a semaphore's head waiter are the claim: claim_owner until claim_until;
-- claim_num is the permits it keeps (semaphore) or 1 once readers were
-- refused (read-write).

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
  -- A semaphore holder's permit slots, each in [0, N): no two live holders
  -- share one (a resource fenced per slot sees one holder at a time, with
  -- growing tokens); {0} for a reader.
  slots int[] NOT NULL,
  PRIMARY KEY (namespace, name, owner)
);

-- Drops the holders of one object whose lease ended or whose clients all
-- lapsed; the caller holds the object's row lock.
CREATE OR REPLACE FUNCTION {F}purge"(p_ns text, p_name text)
RETURNS void LANGUAGE sql AS $fn$
  DELETE FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name
    AND (h.expires_at <= clock_timestamp()
         OR (h.live_ids IS NOT NULL AND NOT {F}any_live"(h.live_ids)));
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

-- How long until one of the object's holders may end (the waiter's hint).
CREATE OR REPLACE FUNCTION {F}holders_left"(p_ns text, p_name text)
RETURNS bigint LANGUAGE sql AS $fn$
  SELECT COALESCE(GREATEST(0, ceil(extract(epoch FROM min(LEAST(h.expires_at,
      COALESCE((SELECT max(v.live_until) FROM {V} v
                WHERE v.client = ANY(h.live_ids)), h.expires_at)))
      - clock_timestamp()) * 1000))::bigint, 0)
  FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name;
$fn$;

-- One hold more for p_owner in {H} (a re-entry, or a fresh hold with a new
-- token or `p_token` when given, in the lowest free slots below p_limit;
-- a reader, p_limit NULL, in slot 0):
-- returns its token, holds, lease end and slots.
CREATE OR REPLACE FUNCTION {F}hold"(p_ns text, p_name text, p_owner text,
    p_permits bigint, p_limit bigint, p_lease_ms bigint, p_live text,
    p_ttl_ms bigint, p_token bigint, OUT o_token bigint, OUT o_holds bigint,
    OUT o_expires timestamptz, OUT o_slots int[])
LANGUAGE plpgsql AS $fn$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_end timestamptz := v_now + p_lease_ms * interval '1 millisecond';
BEGIN
  UPDATE {H} h SET holds = h.holds + 1,
      kept_lease_ms = GREATEST(h.kept_lease_ms, p_lease_ms),
      expires_at = GREATEST(h.expires_at, v_end),
      live_ids = CASE WHEN p_ttl_ms = 0 OR h.live_ids IS NULL THEN NULL
                      WHEN p_live = ANY(h.live_ids) THEN h.live_ids
                      ELSE h.live_ids || p_live END
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
    RETURNING h.fencing_token, h.holds, h.expires_at, h.slots
    INTO o_token, o_holds, o_expires, o_slots;
  IF NOT FOUND THEN
    INSERT INTO {H} (namespace, name, owner, permits, holds, fencing_token,
        kept_lease_ms, expires_at, since, live_ids, slots)
      VALUES (p_ns, p_name, p_owner, p_permits, 1,
        COALESCE(p_token, nextval('{S}')), p_lease_ms, v_end, v_now,
        CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END,
        CASE WHEN p_limit IS NULL THEN ARRAY[0] ELSE
          ARRAY(SELECT x FROM generate_series(0, p_limit - 1) x
                WHERE NOT EXISTS (SELECT 1 FROM {H} h
                                  WHERE h.namespace = p_ns
                                    AND h.name = p_name AND x = ANY(h.slots))
                ORDER BY x LIMIT p_permits) END)
      RETURNING fencing_token, holds, expires_at, slots
      INTO o_token, o_holds, o_expires, o_slots;
  END IF;
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
END
$fn$;

-- Takes p_holds holds of p_owner off one object's holders (more than held:
-- all), once its row is locked: the holds left, NULL when the owner holds
-- nothing live there; at zero its row is gone.
CREATE OR REPLACE FUNCTION {F}take_off"(p_ns text, p_name text,
    p_owner text, p_holds bigint)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_left bigint;
BEGIN
  PERFORM {F}purge"(p_ns, p_name);
  UPDATE {H} h SET holds = h.holds - p_holds
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
    RETURNING h.holds INTO v_left;
  IF FOUND AND v_left <= 0 THEN
    DELETE FROM {H} h
      WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
    RETURN 0;
  END IF;
  RETURN v_left;
END
$fn$;

-- ---- Semaphores (C22) ------------------------------------------------------
-- o_code: 1 granted (token, holds, o_slots); 0 refused (o_left: ms until a holder
-- may end); -2 another N in force (o_token: that N); -3 a re-entry asking
-- other permits (o_token: the permits held).
CREATE OR REPLACE FUNCTION {F}sem_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint, p_limit bigint, p_permits bigint, p_reserve_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint,
               o_slots int[])
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_now timestamptz := clock_timestamp();
  v_count bigint;
  v_used bigint;
  v_claim boolean := COALESCE(v_row.claim_until > v_now, false);
  v_reserved bigint := 0;
  v_mine record;
  v_hold record;
BEGIN
  PERFORM {F}purge"(p_ns, p_name);
  SELECT count(*), COALESCE(sum(h.permits), 0) INTO v_count, v_used
    FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name;
  IF v_count = 0 AND NOT v_claim THEN
    v_row.lim := p_limit;  -- nothing in force: the caller's N
  ELSIF v_row.lim IS DISTINCT FROM p_limit THEN
    RETURN QUERY SELECT -2, v_row.lim, 0::bigint, 0::bigint, NULL::int[];
    RETURN;
  END IF;
  SELECT h.permits INTO v_mine FROM {H} h
    WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner;
  IF FOUND AND v_mine.permits <> p_permits THEN
    RETURN QUERY SELECT -3, v_mine.permits, 0::bigint, 0::bigint,
        NULL::int[];
    RETURN;
  END IF;
  -- Room for the caller, leaving the head waiter's place whole unless the
  -- caller is that waiter (a waiter for many permits is not starved).
  IF v_claim AND v_row.claim_owner <> p_owner THEN
    v_reserved := v_row.claim_num;
  END IF;
  IF FOUND OR v_used + p_permits + v_reserved <= v_row.lim THEN
    v_hold := {F}hold"(p_ns, p_name, p_owner, p_permits, v_row.lim,
                       p_lease_ms, p_live, p_ttl_ms, NULL);
    UPDATE {T} l SET mode = 's', lim = v_row.lim,
        expires_at = GREATEST(l.expires_at, v_hold.o_expires),
        claim_owner = CASE WHEN l.claim_owner = p_owner THEN NULL
                           ELSE l.claim_owner END,
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

-- Takes p_holds holds of p_owner off (more than held: all). Returns the
-- holds left, NULL when the owner holds nothing live here (C4). The last
-- holder frees the object row; a release with waiters is announced.
CREATE OR REPLACE FUNCTION {F}sem_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_channel text)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_left bigint := {F}take_off"(p_ns, p_name, p_owner, p_holds);
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

-- A holder's renewal (a permit, a read hold): one statement, the object
-- row kept alive as long as its holders.
CREATE OR REPLACE FUNCTION {F}holder_renew"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint)
RETURNS boolean LANGUAGE sql AS $fn$
  WITH h AS (
    UPDATE {H} h SET kept_lease_ms = GREATEST(h.kept_lease_ms, p_lease_ms),
        expires_at = GREATEST(h.expires_at, clock_timestamp()
            + GREATEST(h.kept_lease_ms, p_lease_ms) * interval '1 millisecond')
      WHERE h.namespace = p_ns AND h.name = p_name AND h.owner = p_owner
        AND h.expires_at > clock_timestamp()
        AND (h.live_ids IS NULL OR {F}any_live"(h.live_ids))
      RETURNING h.expires_at),
  l AS (
    UPDATE {T} l SET expires_at = GREATEST(l.expires_at, h.expires_at)
      FROM h WHERE l.namespace = p_ns AND l.name = p_name
      RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM h);
$fn$;

-- ---- Read-write locks (C23) ------------------------------------------------

-- The read-held row's expiry and liveness: the latest reader lease, the
-- union of the readers' clients (NULL when a reader has no liveness).
CREATE OR REPLACE FUNCTION {F}mark_readers"(p_ns text, p_name text)
RETURNS void LANGUAGE sql AS $fn$
  UPDATE {T} l SET owner = '', holds = 0, mode = 'r',
      expires_at = r.latest, live_ids = r.ids
    FROM (SELECT max(h.expires_at) AS latest,
                 CASE WHEN bool_and(h.live_ids IS NOT NULL) THEN
                   ARRAY(SELECT DISTINCT unnest(h2.live_ids) FROM {H} h2
                         WHERE h2.namespace = p_ns AND h2.name = p_name)
                 END AS ids
          FROM {H} h WHERE h.namespace = p_ns AND h.name = p_name) r
    WHERE l.namespace = p_ns AND l.name = p_name;
$fn$;

-- o_code 1 granted, 0 refused (o_left the hint).
CREATE OR REPLACE FUNCTION {F}read_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_now timestamptz := clock_timestamp();
  v_writer boolean := v_row.owner <> '' AND v_row.expires_at > v_now
      AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids));
  v_hold record;
BEGIN
  IF v_writer AND v_row.owner = p_owner THEN
    -- The writer takes the read lock too: its token; the row lives as long
    -- as the read, and its release will keep the read ('w').
    v_hold := {F}hold"(p_ns, p_name, p_owner, 1, NULL, p_lease_ms, p_live,
                       p_ttl_ms, v_row.fencing_token);
    UPDATE {T} l SET mode = 'w',
        expires_at = GREATEST(l.expires_at, v_hold.o_expires)
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 1, v_hold.o_token, v_hold.o_holds, 0::bigint;
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
    -- A writer waits for the readers there now: no new one (C23's bound).
    UPDATE {T} l SET claim_num = 1, wanted = l.wanted OR p_wait
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 0, 0::bigint, 0::bigint, GREATEST(0, ceil(extract(
        epoch FROM v_row.claim_until - v_now) * 1000))::bigint;
    RETURN;
  END IF;
  v_hold := {F}hold"(p_ns, p_name, p_owner, 1, NULL, p_lease_ms, p_live,
                     p_ttl_ms, NULL);
  IF v_row.mode IS DISTINCT FROM 'r' THEN
    UPDATE {T} l SET since = v_now, claim_owner = NULL, claim_until = NULL
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  PERFORM {F}mark_readers"(p_ns, p_name);
  RETURN QUERY SELECT 1, v_hold.o_token, v_hold.o_holds, 0::bigint;
END
$fn$;

-- Returns the holds left, NULL when the owner reads nothing live here.
CREATE OR REPLACE FUNCTION {F}read_release"(p_ns text, p_name text,
    p_owner text, p_holds bigint, p_channel text)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_left bigint := {F}take_off"(p_ns, p_name, p_owner, p_holds);
BEGIN
  IF v_left IS DISTINCT FROM 0 THEN
    RETURN v_left;  -- NULL: the owner holds nothing live here
  END IF;
  IF v_row.owner <> '' THEN
    -- The writer's own read ended; its write hold goes on.
    UPDATE {T} l SET mode = NULL WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN 0;
  END IF;
  IF EXISTS (SELECT 1 FROM {H} h
             WHERE h.namespace = p_ns AND h.name = p_name) THEN
    PERFORM {F}mark_readers"(p_ns, p_name);
    RETURN 0;
  END IF;
  IF v_row.claim_until > clock_timestamp() THEN
    -- The last reader hands the lock to the waiting writer.
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

-- A writer that the usual acquire statement refused on a row of mode 'r'
-- or 'v' asks here (one round trip more, only then): the hand-off, the
-- upgrade refusal, and the intent that stops new readers. o_code 1 granted,
-- 0 refused (o_left), -4 the owner reads this lock (no upgrade).
CREATE OR REPLACE FUNCTION {F}write_acquire"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint, p_intent_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_now timestamptz := clock_timestamp();
  v_token bigint;
  v_live boolean;
BEGIN
  v_live := v_row.expires_at > v_now
      AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids));
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
      fencing_token = nextval('{S}'), kept_lease_ms = p_lease_ms,
      expires_at = v_now + p_lease_ms * interval '1 millisecond',
      since = v_now, session_key = NULL,
      wanted = l.mode = 'v' AND l.claim_num > 0,
      claim_owner = NULL, claim_until = NULL, claim_num = NULL,
      live_ids = CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END
    WHERE l.namespace = p_ns AND l.name = p_name
    RETURNING l.fencing_token INTO v_token;
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
  RETURN QUERY SELECT 1, v_token, 1::bigint, 0::bigint;
END
$fn$;

-- The release of a writer's last write hold on a row of mode 'w' (the usual
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

-- ---- Elections (C24) -------------------------------------------------------
-- An election is a lock row under E'\x1fe' || name that also keeps the
-- leader's value and is always `wanted`, so that the usual release and
-- force unlock announce every end of a leadership to observers. Renewal and
-- release are the lock's statements. o_code 1 leader, 0 refused (o_left).
CREATE OR REPLACE FUNCTION {F}campaign"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_live text, p_ttl_ms bigint,
    p_value bytea, p_channel text)
RETURNS TABLE (o_code int, o_token bigint, o_holds bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}lock_row"(p_ns, p_name);
  v_now timestamptz := clock_timestamp();
  v_end timestamptz := v_now + p_lease_ms * interval '1 millisecond';
  v_live boolean := v_row.owner <> '' AND v_row.expires_at > v_now
      AND (v_row.live_ids IS NULL OR {F}any_live"(v_row.live_ids));
BEGIN
  IF v_live AND v_row.owner <> p_owner THEN
    UPDATE {T} l SET wanted = true
      WHERE l.namespace = p_ns AND l.name = p_name;
    RETURN QUERY SELECT 0, 0::bigint, 0::bigint, GREATEST(0, ceil(extract(
        epoch FROM v_row.expires_at - v_now) * 1000))::bigint;
    RETURN;
  END IF;
  IF v_live THEN
    UPDATE {T} l SET holds = l.holds + 1,
        kept_lease_ms = GREATEST(l.kept_lease_ms, p_lease_ms),
        expires_at = GREATEST(l.expires_at, v_end), value = p_value
      WHERE l.namespace = p_ns AND l.name = p_name;
    v_row.holds := v_row.holds + 1;
  ELSE
    UPDATE {T} l SET owner = p_owner, holds = 1,
        fencing_token = nextval('{S}'), kept_lease_ms = p_lease_ms,
        expires_at = v_end, since = v_now, wanted = true, value = p_value,
        live_ids = CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END
      WHERE l.namespace = p_ns AND l.name = p_name
      RETURNING l.fencing_token INTO v_row.fencing_token;
    v_row.holds := 1;
  END IF;
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
  IF NOT v_live OR v_row.value IS DISTINCT FROM p_value THEN
    PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
  END IF;
  RETURN QUERY SELECT 1, v_row.fencing_token, v_row.holds, 0::bigint;
END
$fn$;

-- ---- Multi-locks (C25) -----------------------------------------------------
-- Every name or none, in one transaction: rows locked in one global order
-- (so two calls never wait on each other in a cycle), all checked, then all
-- taken. o_code 1 (o_token: one token for the fresh holds; o_index 0), or
-- 0 with o_index the 1-based position (in p_names) of a name another owner
-- holds, marked wanted so that its release wakes us, and o_left its hint.
CREATE OR REPLACE FUNCTION {F}acquire_all"(p_ns text, p_names text[],
    p_owner text, p_lease_ms bigint, p_wait boolean, p_live text,
    p_ttl_ms bigint)
RETURNS TABLE (o_code int, o_token bigint, o_index int, o_left bigint)
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
        AND (v_row.owner = '' OR v_row.live_ids IS NULL
             OR {F}any_live"(v_row.live_ids)) THEN
      IF p_wait THEN
        UPDATE {T} l SET wanted = true
          WHERE l.namespace = p_ns AND l.name = v_name;
      END IF;
      RETURN QUERY SELECT 0, 0::bigint, array_position(p_names, v_name),
          GREATEST(0, ceil(extract(epoch FROM v_row.expires_at - v_now)
                           * 1000))::bigint;
      RETURN;
    END IF;
  END LOOP;
  v_now := clock_timestamp();
  v_token := nextval('{S}');
  UPDATE {T} l SET
      holds = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                   THEN l.holds + 1 ELSE 1 END,
      fencing_token = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                           THEN l.fencing_token ELSE v_token END,
      kept_lease_ms = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
          THEN GREATEST(l.kept_lease_ms, p_lease_ms) ELSE p_lease_ms END,
      expires_at = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
          THEN GREATEST(l.expires_at, v_now + p_lease_ms * interval '1 ms')
          ELSE v_now + p_lease_ms * interval '1 ms' END,
      since = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                   THEN l.since ELSE v_now END,
      wanted = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                    THEN l.wanted ELSE false END,
      live_ids = CASE WHEN p_ttl_ms > 0 THEN ARRAY[p_live] END,
      owner = p_owner, mode = NULL
    WHERE l.namespace = p_ns AND l.name = ANY(p_names);
  IF p_ttl_ms > 0 THEN
    INSERT INTO {V} (client, live_until)
      VALUES (p_live, v_now + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (client) DO UPDATE SET live_until = EXCLUDED.live_until;
  END IF;
  RETURN QUERY SELECT 1, v_token, 0, 0::bigint;
END
$fn$;
