// Copyright dlock authors. Schema version 7's elections (C24): the
// campaign functions and the statements of an election's row, from the
// validated draft (docs/design/validation/postgres_primitives.sql) with
// version 6's next_token, and session mode's campaign.
#include "pg_schema.h"

namespace dlock::postgres {

extern const char kElectionSchema[] = R"sql(
-- Elections (C24). An election is a lock row under E'\x1fe' || name that
-- also keeps the leader's value and is always `wanted`, so that the lock's
-- own release and force unlock announce every end of a leadership to
-- observers; renewal and release are the lock's statements. The same
-- answer as a lock's acquire (o_got, o_holds, o_token, o_left). A new
-- leader, or a new value, is announced.
CREATE OR REPLACE FUNCTION {F}campaign"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_live text, p_ttl_ms bigint,
    p_value bytea, p_channel text)
RETURNS TABLE (o_got boolean, o_holds bigint, o_token bigint, o_left bigint)
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
    RETURN QUERY SELECT false, 0::bigint, 0::bigint, GREATEST(0, ceil(extract(
        epoch FROM v_row.expires_at - v_now) * 1000))::bigint;
    RETURN;
  END IF;
  IF v_live THEN
    UPDATE {T} l SET holds = l.holds + 1,
        kept_lease_ms = GREATEST(l.kept_lease_ms, p_lease_ms),
        expires_at = GREATEST(l.expires_at, v_end), value = p_value,
        live_ids = CASE WHEN p_ttl_ms = 0 OR l.live_ids IS NULL THEN NULL
                        WHEN p_live = ANY(l.live_ids) THEN l.live_ids
                        ELSE l.live_ids || p_live END
      WHERE l.namespace = p_ns AND l.name = p_name;
    v_row.holds := v_row.holds + 1;
  ELSE
    UPDATE {T} l SET owner = p_owner, holds = 1,
        fencing_token = {F}next_token"(), kept_lease_ms = p_lease_ms,
        expires_at = v_end, since = v_now, wanted = true, value = p_value,
        session_key = NULL, dead_since = NULL,
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
  RETURN QUERY SELECT true, v_row.holds, v_row.fencing_token, 0::bigint;
END
$fn$;

-- Session mode's campaign: the lock's session acquire (its key, its grace),
-- then the value, in one transaction.
CREATE OR REPLACE FUNCTION {F}s_campaign"(p_ns text, p_name text,
    p_owner text, p_lease_ms bigint, p_have boolean, p_grace_ms bigint,
    p_value bytea, p_channel text)
RETURNS TABLE (o_got boolean, o_holds bigint, o_token bigint, o_left bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v record;
  v_old bytea;
BEGIN
  SELECT * INTO v FROM {F}acquire"(p_ns, p_name, p_owner, p_lease_ms, p_have,
                                   p_grace_ms);
  IF v.o_got THEN
    SELECT l.value INTO v_old FROM {T} l
      WHERE l.namespace = p_ns AND l.name = p_name;
    UPDATE {T} l SET value = p_value, wanted = true
      WHERE l.namespace = p_ns AND l.name = p_name;
    IF v.o_holds = 1 OR v_old IS DISTINCT FROM p_value THEN
      PERFORM pg_notify(p_channel, p_ns || ':' || p_name);
    END IF;
  END IF;
  RETURN QUERY SELECT v.o_got, v.o_holds, v.o_token, v.o_left;
END
$fn$;
)sql";

namespace {

// An election's leader, read as a lock's: live, its liveness current; the
// value hex-encoded.
constexpr char kLeader[] = R"sql(
SELECT substr(l.name, 3), l.owner, l.holds, l.fencing_token,
  GREATEST(0, extract(epoch FROM l.expires_at - clock_timestamp())
              * 1000000)::bigint,
  (extract(epoch FROM l.since) * 1000000)::bigint, encode(l.value, 'hex'),
  CASE WHEN l.session_key IS NOT NULL OR l.live_ids IS NOT NULL THEN true END
FROM {T} l
WHERE l.namespace = $1 AND {W} AND l.owner <> ''
  AND l.expires_at > clock_timestamp()
  AND (l.live_ids IS NULL OR {F}any_live"(l.live_ids))
  AND (l.session_key IS NULL OR {F}alive"(l.session_key))
ORDER BY l.name
)sql";

// The leader's new value, while it leads with the term $5; announced.
// $4 the value, hex.
constexpr char kProclaim[] = R"sql(
WITH p AS (
  UPDATE {T} AS l SET value = decode($4, 'hex')
  WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3
    AND l.fencing_token = $5::bigint AND l.expires_at > clock_timestamp()
  RETURNING 1)
SELECT pg_notify($6, $1 || ':' || $2)::text FROM p
)sql";

}  // namespace

void PrimitiveSql::FillElections(
    const std::function<std::string(absl::string_view)>& fill) {
  campaign = {"dlock_campaign",
              fill("SELECT * FROM {F}campaign\"($1, $2, $3, $4, $5, $6, "
                   "decode($7, 'hex'), $8)")};
  s_campaign = {"dlock_s_campaign",
                fill("SELECT * FROM {F}s_campaign\"($1, $2, $3, $4, $5, $6, "
                     "decode($7, 'hex'), $8)")};
  proclaim = {"dlock_proclaim", fill(kProclaim)};
  ByNameAndPrefix(fill(kLeader), "dlock_leader", leader_inspect, leader_list);
}

}  // namespace dlock::postgres
