-- Queen 2.x's key/value store (engine/kv.py): POST /api/v1/kv and the transaction's `kv` rider.
--
-- A row is (namespace, key) -> a JSON value with a version and an expiry. Both name columns
-- sort by bytes (COLLATE "C"): a prefix page and its `after` cursor mean the same on every
-- machine, and engine/kv.py applies a call's writes in that order, so two calls that share keys
-- lock them in one order and cannot deadlock on each other.
--
-- A version comes from a sequence, never from version + 1: a key that expired and was written
-- again cannot hand out a version an old holder still carries. Callers compare versions for
-- equality only. An expired row is absent for every reader and every precondition, whether or
-- not the stats loop has deleted it yet (rq_kv_purge_step).
--
-- Counters update in place and expiring keys come and go: updates stay on their page and
-- autovacuum follows the churn; the heap is never truncated (its exclusive lock stalls readers).
CREATE TABLE IF NOT EXISTS rq_kv (
    namespace   text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    value       jsonb NOT NULL,              -- JSON null is a value
    version     bigint NOT NULL,
    expires_at  timestamptz,                 -- NULL: forever, which a writer must ask for
    created_at  timestamptz NOT NULL,        -- restarts when an expired key is written again
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (namespace, key)
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
        vacuum_truncate = off);
CREATE SEQUENCE IF NOT EXISTS rq_kv_versions AS bigint CACHE 100;
-- The purge's only way in; keys written forever are not in it.
CREATE INDEX IF NOT EXISTS rq_kv_expiry ON rq_kv (expires_at) WHERE expires_at IS NOT NULL;

CREATE OR REPLACE FUNCTION rq_kv_live(p_expires timestamptz, p_now timestamptz) RETURNS bool
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_expires IS NULL OR p_expires > p_now
$$;

-- A row as a reader sees it: key, value, version, expiresAt, updatedAt (value left out for keysOnly).
CREATE OR REPLACE FUNCTION rq_kv_row(p_row rq_kv, p_with_value bool) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('key', p_row.key, 'version', p_row.version,
                              'expiresAt', rq_iso(p_row.expires_at), 'updatedAt', rq_iso(p_row.updated_at))
           || CASE WHEN p_with_value THEN jsonb_build_object('value', p_row.value) ELSE '{}'::jsonb END
$$;

-- Apply a call's operations, already validated and put in apply order by engine/kv.py: each op
-- is {i, op, ns, key | keys | prefix, ...} with `op` the client's name (putIfAbsent arrives as a
-- put with expect 0 and keeps its name in `shown`). Answers one result per op, in the order given;
-- each carries its `index` (i). One instant, the transaction's, decides every expiry of the call.
--
-- Single-key writes lock their row (or insert it) before deciding, so a precondition is judged
-- against the row as it will commit; a `check` locks it for share, so a write that would move it
-- waits for this transaction. An op that lost its precondition answers applied:false and changes
-- nothing, unless it is `required`: then the whole transaction rolls back, and the exception's
-- detail carries the verdict (index, op, reason, version, value) for engine/kv.py to answer.
--
-- Reads of several keys share p_read_bytes: rows are returned while the bytes before them fit,
-- and a cut result says `truncated`.
CREATE OR REPLACE FUNCTION rq_kv_apply(p_ops jsonb, p_read_bytes bigint) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now      timestamptz := now();
    v_out      jsonb := '[]'::jsonb;
    v_op       jsonb;
    v_kind     text;
    v_ns       text;
    v_key      text;
    v_expect   bigint;
    v_expiry   timestamptz;
    v_row      rq_kv%ROWTYPE;
    v_found    bool;
    v_live     bool;
    v_version  bigint;
    v_number   numeric;
    v_next     numeric;
    v_applied  bool;
    v_reason   text;
    v_value    jsonb;
    v_res      jsonb;
    v_left     bigint := p_read_bytes;
    v_rows     jsonb;
    v_bytes    bigint;
    v_kept     bigint;
    v_seen     bigint;
    v_last     text;
BEGIN
    FOR v_op IN SELECT e FROM jsonb_array_elements(p_ops) AS t(e) LOOP
        v_kind := v_op->>'op';
        v_ns := v_op->>'ns';
        v_key := v_op->>'key';
        v_expect := (v_op->>'expect')::bigint;
        v_expiry := CASE WHEN v_op ? 'ttl' THEN v_now + make_interval(secs => (v_op->>'ttl')::float8) END;
        v_res := NULL;
        v_reason := NULL;
        v_found := false;
        v_live := false;
        v_version := 0;
        v_value := NULL;

        IF v_kind IN ('put', 'delete', 'incr', 'check') THEN
            -- Lock the row, or create it when the op would; a concurrent creator makes the
            -- insert do nothing, and the next turn finds its row and locks it.
            LOOP
                IF v_kind = 'check' THEN
                    SELECT * INTO v_row FROM rq_kv k WHERE k.namespace = v_ns AND k.key = v_key FOR SHARE;
                ELSE
                    SELECT * INTO v_row FROM rq_kv k WHERE k.namespace = v_ns AND k.key = v_key FOR UPDATE;
                END IF;
                v_found := FOUND;
                EXIT WHEN v_found OR v_kind IN ('delete', 'check') OR (v_kind = 'put' AND v_expect > 0);
                EXIT WHEN v_kind = 'incr' AND ((v_op->'min' IS NOT NULL AND (v_op->>'delta')::numeric < (v_op->>'min')::numeric)
                                             OR (v_op->'max' IS NOT NULL AND (v_op->>'delta')::numeric > (v_op->>'max')::numeric));
                INSERT INTO rq_kv AS k (namespace, key, value, version, expires_at, created_at, updated_at)
                VALUES (v_ns, v_key,
                        CASE WHEN v_kind = 'incr' THEN to_jsonb(trim_scale((v_op->>'delta')::numeric)) ELSE v_op->'value' END,
                        nextval('rq_kv_versions'), v_expiry, v_now, v_now)
                ON CONFLICT (namespace, key) DO NOTHING
                RETURNING k.* INTO v_row;
                IF FOUND THEN
                    v_res := jsonb_build_object('applied', true, 'value', v_row.value, 'version', v_row.version);
                    EXIT;
                END IF;
            END LOOP;
            v_live := v_found AND rq_kv_live(v_row.expires_at, v_now);
            v_version := CASE WHEN v_live THEN v_row.version ELSE 0 END;
            v_value := CASE WHEN v_live THEN v_row.value END;
        END IF;

        IF v_res IS NOT NULL THEN
            NULL;  -- created above
        ELSIF v_kind = 'put' THEN
            v_applied := v_expect IS NULL OR (v_expect = 0 AND NOT v_live) OR (v_expect > 0 AND v_version = v_expect);
            IF v_applied THEN
                UPDATE rq_kv k SET value = v_op->'value', version = nextval('rq_kv_versions'), expires_at = v_expiry,
                                   created_at = CASE WHEN v_live THEN k.created_at ELSE v_now END, updated_at = v_now
                WHERE k.namespace = v_ns AND k.key = v_key
                RETURNING k.* INTO v_row;
                v_res := jsonb_build_object('applied', true, 'value', v_row.value, 'version', v_row.version);
            ELSE
                v_reason := CASE WHEN v_expect = 0 THEN 'exists' WHEN v_version = 0 THEN 'absent' ELSE 'version' END;
            END IF;
        ELSIF v_kind = 'delete' THEN
            v_applied := CASE WHEN v_expect IS NULL THEN v_live
                              WHEN v_expect = 0 THEN NOT v_live
                              ELSE v_version = v_expect END;
            IF v_found AND (v_expect IS NULL OR (v_applied AND v_expect > 0)) THEN
                -- an expired row goes too, though it was never there for anyone
                DELETE FROM rq_kv k WHERE k.namespace = v_ns AND k.key = v_key;
            END IF;
            IF v_applied THEN
                v_res := jsonb_build_object('applied', true, 'value', v_value, 'version', v_version);
            ELSE
                v_reason := CASE WHEN v_expect = 0 THEN 'exists' WHEN v_version = 0 THEN 'absent' ELSE 'version' END;
            END IF;
        ELSIF v_kind = 'incr' THEN
            v_number := CASE WHEN v_live AND jsonb_typeof(v_row.value) = 'number' THEN (v_row.value #>> '{}')::numeric ELSE 0 END;
            v_next := v_number + (v_op->>'delta')::numeric;
            IF v_live AND jsonb_typeof(v_row.value) <> 'number' THEN
                v_reason := 'type';
            ELSIF (v_op->'min' IS NOT NULL AND v_next < (v_op->>'min')::numeric)
               OR (v_op->'max' IS NOT NULL AND v_next > (v_op->>'max')::numeric) THEN
                v_reason := 'limit';
            END IF;
            IF v_reason IS NULL AND v_found THEN
                -- the expiry is set when the counter starts: a live one keeps its own
                UPDATE rq_kv k SET value = to_jsonb(trim_scale(v_next)), version = nextval('rq_kv_versions'),
                                   expires_at = CASE WHEN v_live THEN k.expires_at ELSE v_expiry END,
                                   created_at = CASE WHEN v_live THEN k.created_at ELSE v_now END, updated_at = v_now
                WHERE k.namespace = v_ns AND k.key = v_key
                RETURNING k.* INTO v_row;
                v_res := jsonb_build_object('applied', true, 'value', v_row.value, 'version', v_row.version);
            ELSE
                v_reason := coalesce(v_reason, 'limit');  -- not found: refused before the insert
                v_value := to_jsonb(trim_scale(v_number));
            END IF;
        ELSIF v_kind = 'check' THEN
            IF (v_expect = 0 AND NOT v_live) OR (v_expect > 0 AND v_version = v_expect) THEN
                v_res := jsonb_build_object('applied', true, 'value', v_value, 'version', v_version);
            ELSE
                v_reason := CASE WHEN v_expect = 0 THEN 'exists' WHEN v_version = 0 THEN 'absent' ELSE 'version' END;
            END IF;
        ELSIF v_kind = 'get' THEN
            SELECT * INTO v_row FROM rq_kv k
            WHERE k.namespace = v_ns AND k.key = v_key AND rq_kv_live(k.expires_at, v_now);
            IF FOUND THEN
                v_left := v_left - octet_length(v_row.value::text);
                v_res := rq_kv_row(v_row, true) || jsonb_build_object('found', true);
            ELSE
                v_res := jsonb_build_object('found', false, 'key', v_key);
            END IF;
        ELSIF v_kind IN ('getMany', 'getPrefix') THEN
            WITH hit AS (
                SELECT k AS r, k.key, CASE WHEN (v_op->>'keysOnly')::bool THEN 0 ELSE octet_length(k.value::text) END AS size
                FROM rq_kv k
                WHERE k.namespace = v_ns AND rq_kv_live(k.expires_at, v_now)
                  AND (v_kind <> 'getMany' OR k.key = ANY (ARRAY(SELECT jsonb_array_elements_text(v_op->'keys'))))
                  AND (v_kind <> 'getPrefix' OR (k.key >= v_op->>'prefix' AND starts_with(k.key, v_op->>'prefix')
                                                 AND (v_op->>'after' IS NULL OR k.key > v_op->>'after')))
                ORDER BY k.key
                LIMIT CASE WHEN v_kind = 'getPrefix' THEN (v_op->>'limit')::int + 1 END
            ), counted AS (
                SELECT h.*, row_number() OVER (ORDER BY h.key) AS n,
                       coalesce(sum(h.size) OVER (ORDER BY h.key ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
                FROM hit h
            ), kept AS (
                SELECT * FROM counted c
                WHERE c.before < v_left AND (v_kind <> 'getPrefix' OR c.n <= (v_op->>'limit')::int)
            )
            SELECT coalesce(jsonb_agg(rq_kv_row(kept.r, NOT coalesce((v_op->>'keysOnly')::bool, false)) ORDER BY kept.key), '[]'),
                   coalesce(sum(kept.size), 0), count(*), max(kept.key), (SELECT count(*) FROM counted)
            INTO v_rows, v_bytes, v_kept, v_last, v_seen
            FROM kept;
            v_left := v_left - v_bytes;
            IF v_kind = 'getMany' THEN
                v_res := jsonb_build_object('rows', v_rows, 'truncated', v_kept < v_seen, 'missing',
                    (SELECT coalesce(jsonb_agg(w.k ORDER BY w.n), '[]') FROM jsonb_array_elements_text(v_op->'keys')
                         WITH ORDINALITY AS w(k, n)
                     WHERE NOT EXISTS (SELECT 1 FROM rq_kv k WHERE k.namespace = v_ns AND k.key = w.k
                                                            AND rq_kv_live(k.expires_at, v_now))));
            ELSE
                v_res := jsonb_build_object('rows', v_rows, 'truncated', v_kept < v_seen,
                                            'nextAfter', CASE WHEN v_kept < v_seen THEN v_last END);
            END IF;
        END IF;

        IF v_res IS NULL THEN
            -- lost: what a reader sees now, so the loser needs no second call
            v_res := jsonb_build_object('applied', false, 'reason', v_reason, 'value', v_value, 'version', v_version);
            IF (v_op->>'required')::bool THEN
                RAISE EXCEPTION 'kv_precondition_failed' USING ERRCODE = 'check_violation',
                    DETAIL = jsonb_build_object('index', (v_op->>'i')::int, 'reason', v_reason,
                                                'version', v_version, 'value', v_value)::text;
            END IF;
        END IF;
        IF v_kind NOT IN ('getMany', 'getPrefix') THEN
            v_res := v_res || jsonb_build_object('key', v_key);
        END IF;
        v_out := v_out || jsonb_build_array(jsonb_build_object('index', (v_op->>'i')::int, 'op', v_op->>'shown') || v_res);
    END LOOP;
    RETURN v_out;
END;
$$;

-- Delete up to p_limit rows that expired; the stats loop calls it in bounded steps.
CREATE OR REPLACE FUNCTION rq_kv_purge_step(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_kv WHERE expires_at <= now() AND ctid IN (
            SELECT ctid FROM rq_kv WHERE expires_at <= now() ORDER BY expires_at LIMIT p_limit)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
