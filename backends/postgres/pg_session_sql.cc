// Copyright dlock authors. Session mode's functions (schema versions 1 to
// 6): the liveness test of a session's advisory lock and the lock's
// acquire, release and renewal, run after kCreate's tables in its
// transaction. Placeholders as in pg_schema.cc.
#include "pg_schema.h"

namespace dlock::postgres {

extern const char kSessionSchema[] = R"sql(
-- Whether some session still holds the shared advisory lock on p_key: the
-- exclusive try fails exactly when another session does. A shared lock held
-- by this very session counts as alive too: it cannot be told from the
-- holder's behind a transaction-pooling proxy, and in direct use no caller
-- runs this while holding one.
CREATE OR REPLACE FUNCTION {F}alive"(p_key bigint)
RETURNS boolean LANGUAGE sql AS $fn$
  SELECT NOT pg_try_advisory_xact_lock(p_key) OR EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid()
      AND mode = 'ShareLock' AND granted AND objsubid = 1
      AND classid = ((p_key >> 32) & 4294967295)::oid
      AND objid = (p_key & 4294967295)::oid)
$fn$;

-- Why the grace is safe (C19): the holder believes in a hold only until the
-- send time of the last statement the server answered on its session, plus
-- the grace, less a margin for clock rates (SessionBackend::HeldUntil). That
-- statement ran before the session died, and the session died no later than
-- an acquirer first found it gone (dead_since); the takeover waits until
-- dead_since + grace on the server's clock. So the holder's belief ends
-- before (death + grace) <= (dead_since + grace) <= the takeover.
CREATE OR REPLACE FUNCTION {F}acquire"(p_ns text, p_name text, p_owner text,
    p_lease_ms bigint, p_have boolean, p_grace_ms bigint)
RETURNS TABLE (o_got boolean, o_holds bigint, o_token bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_key bigint := hashtextextended(p_ns || '/' || p_name, 0);
  v_lease interval := p_lease_ms * interval '1 millisecond';
  v_row record;
  v_now timestamptz;
  v_until timestamptz;
BEGIN
  LOOP
    SELECT l.owner, l.expires_at, l.session_key, l.dead_since, l.grace_ms
      INTO v_row FROM {T} l
      WHERE l.namespace = p_ns AND l.name = p_name FOR UPDATE;
    v_now := clock_timestamp();
    IF NOT FOUND THEN
      INSERT INTO {T} AS l (namespace, name, owner, holds, fencing_token,
          kept_lease_ms, expires_at, since, session_key, grace_ms)
        VALUES (p_ns, p_name, p_owner, 1, {F}next_token"(), p_lease_ms,
          v_now + v_lease, v_now, v_key, p_grace_ms)
        ON CONFLICT DO NOTHING RETURNING l.fencing_token INTO o_token;
      IF NOT FOUND THEN
        CONTINUE;  -- a concurrent insert won; look at its row
      END IF;
      IF NOT p_have THEN
        PERFORM pg_advisory_lock_shared(v_key);
      END IF;
      RETURN QUERY SELECT true, 1::bigint, o_token, 0::bigint;
      RETURN;
    END IF;
    -- Re-entry: ours and live (our own session's lock, or anybody's). The
    -- row keeps the longest grace of its sessions' holders; a version-1
    -- holder's NULL stays.
    IF v_row.owner = p_owner AND v_row.expires_at > v_now AND (p_have
        OR v_row.session_key IS NULL OR {F}alive"(v_row.session_key)) THEN
      UPDATE {T} l SET holds = l.holds + 1,
          kept_lease_ms = GREATEST(l.kept_lease_ms, p_lease_ms),
          expires_at = GREATEST(l.expires_at, v_now + v_lease),
          dead_since = NULL,
          grace_ms = CASE WHEN l.grace_ms IS NULL THEN NULL
                          ELSE GREATEST(l.grace_ms, p_grace_ms) END
        WHERE l.namespace = p_ns AND l.name = p_name
        RETURNING l.holds, l.fencing_token INTO o_holds, o_token;
      IF NOT p_have THEN
        PERFORM pg_advisory_lock_shared(v_key);
      END IF;
      RETURN QUERY SELECT true, o_holds, o_token, 0::bigint;
      RETURN;
    END IF;
    -- Our session's lock is stale (the hold was lost): let go of it first,
    -- so that the liveness test below sees only other sessions.
    IF p_have THEN
      PERFORM pg_advisory_unlock_shared(v_key);
      p_have := false;
    END IF;
    IF v_row.expires_at > v_now THEN
      v_until := v_row.expires_at;
      IF v_row.session_key IS NULL OR {F}alive"(v_row.session_key) THEN
        v_row.dead_since := NULL;
      ELSIF v_row.grace_ms IS NOT NULL THEN
        -- The holder's session is gone: it may still believe in its hold
        -- for up to its grace after it died; wait that long.
        v_row.dead_since := COALESCE(v_row.dead_since, v_now);
        v_until := LEAST(v_until,
            v_row.dead_since + v_row.grace_ms * interval '1 millisecond');
      END IF;
      IF v_until > v_now THEN
        -- A waiter now: the holder's release must announce itself.
        UPDATE {T} l SET wanted = true, dead_since = v_row.dead_since
          WHERE l.namespace = p_ns AND l.name = p_name;
        RETURN QUERY SELECT false, 0::bigint, 0::bigint, GREATEST(0,
            ceil(extract(epoch FROM v_until - v_now) * 1000))::bigint;
        RETURN;
      END IF;
    END IF;
    -- Free, expired, or its holder's session gone for the grace: take it.
    UPDATE {T} l SET owner = p_owner, holds = 1,
        fencing_token = {F}next_token"(), kept_lease_ms = p_lease_ms,
        expires_at = v_now + v_lease, since = v_now, session_key = v_key,
        wanted = false, dead_since = NULL, grace_ms = p_grace_ms,
        live_ids = NULL
      WHERE l.namespace = p_ns AND l.name = p_name
      RETURNING l.fencing_token INTO o_token;
    PERFORM pg_advisory_lock_shared(v_key);
    RETURN QUERY SELECT true, 1::bigint, o_token, 0::bigint;
    RETURN;
  END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION {F}owned"(p_ns text, p_name text, p_owner text,
    p_have boolean)
RETURNS {T} LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T};
BEGIN
  SELECT * INTO v_row FROM {T} l
    WHERE l.namespace = p_ns AND l.name = p_name FOR UPDATE;
  IF NOT FOUND OR v_row.owner <> p_owner
      OR v_row.expires_at <= clock_timestamp()
      OR (NOT p_have AND v_row.session_key IS NOT NULL
          AND NOT {F}alive"(v_row.session_key)) THEN
    IF p_have THEN
      PERFORM pg_advisory_unlock_shared(hashtextextended(p_ns || '/' || p_name, 0));
    END IF;
    RETURN NULL;
  END IF;
  RETURN v_row;
END
$fn$;

CREATE OR REPLACE FUNCTION {F}release"(p_ns text, p_name text, p_owner text,
    p_holds bigint, p_have boolean, p_keep boolean, p_channel text,
    p_keep_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}owned"(p_ns, p_name, p_owner, p_have);
  v_left bigint;
BEGIN
  IF v_row.name IS NULL THEN
    RETURN NULL;
  END IF;
  v_left := GREATEST(v_row.holds - p_holds, 0);
  IF v_left = 0 THEN
    IF p_keep_ms > 0 THEN
      -- Kept after release: nobody's, no session's, expiring by itself.
      UPDATE {T} l SET owner = '', holds = 0, session_key = NULL,
          dead_since = NULL, live_ids = NULL,
          expires_at = clock_timestamp() + p_keep_ms * interval '1 millisecond'
        WHERE l.namespace = p_ns AND l.name = p_name;
    ELSE
      UPDATE {T} l SET owner = '', holds = 0, expires_at = clock_timestamp()
        WHERE l.namespace = p_ns AND l.name = p_name;
    END IF;
    -- A kept lock is announced too: its waiters look again and sleep until
    -- it expires. A notifying commit takes a cluster-wide lock and wakes every
    -- listener: only when a waiter marked the row.
    IF v_row.wanted THEN
      PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
    END IF;
  ELSE
    UPDATE {T} l SET holds = v_left
      WHERE l.namespace = p_ns AND l.name = p_name;
  END IF;
  IF p_have AND (v_left = 0 OR NOT p_keep) THEN
    PERFORM pg_advisory_unlock_shared(hashtextextended(p_ns || '/' || p_name, 0));
  END IF;
  RETURN v_left;
END
$fn$;

CREATE OR REPLACE FUNCTION {F}renew"(p_ns text, p_name text, p_owner text,
    p_lease_ms bigint, p_have boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  v_row {T} := {F}owned"(p_ns, p_name, p_owner, p_have);
BEGIN
  IF v_row.name IS NULL THEN
    RETURN false;
  END IF;
  UPDATE {T} l SET kept_lease_ms = GREATEST(l.kept_lease_ms, p_lease_ms),
      expires_at = GREATEST(l.expires_at, clock_timestamp()
          + GREATEST(l.kept_lease_ms, p_lease_ms) * interval '1 millisecond')
    WHERE l.namespace = p_ns AND l.name = p_name;
  RETURN true;
END
$fn$;

)sql";

}  // namespace dlock::postgres
