-- Queen 2.x's locks and semaphores (engine/locks.py): a permit is one rq_kv row in the namespace
-- queen-locks, keyed `name#slot`, valued {owner, since, renewedAt}, whose version is the fencing
-- token and whose expiry is the permit's lifetime. A semaphore of n permits has slots 0..n-1.
-- A transaction commits under a permit with the kv rider's `check` of that row at the token
-- (the guard each answer carries), so a holder that was replaced commits nothing.

CREATE OR REPLACE FUNCTION rq_lock_guard(p_name text, p_slot int, p_token bigint) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('op', 'check', 'ns', 'queen-locks', 'key', p_name || '#' || p_slot,
                              'expect', p_token, 'required', true)
$$;

-- The slot of a permit's key; NULL for a key of the namespace that is not a permit's (the kv
-- routes may write any key there).
CREATE OR REPLACE FUNCTION rq_lock_slot(p_key text) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN split_part(p_key, '#', 2) ~ '^[0-9]{1,4}$' THEN split_part(p_key, '#', 2)::int END
$$;

-- Whether a key of queen-locks is a permit of the lock p_name (of its slot p_slot, unless NULL).
-- The range leads the (namespace, key) index; the function is inlined into its callers' plans.
CREATE OR REPLACE FUNCTION rq_lock_permit_of(p_key text, p_name text, p_slot int) RETURNS bool
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_key >= p_name || '#' AND starts_with(p_key, p_name || '#') AND rq_lock_slot(p_key) IS NOT NULL
           AND (p_slot IS NULL OR p_key = p_name || '#' || p_slot::text)
$$;

-- What every granted permit answers: its slot, token, expiry and guard.
CREATE OR REPLACE FUNCTION rq_lock_granted(p_name text, p_permit rq_kv) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('slot', rq_lock_slot(p_permit.key), 'token', p_permit.version,
                              'expiresAt', rq_iso(p_permit.expires_at),
                              'guard', rq_lock_guard(p_name, rq_lock_slot(p_permit.key), p_permit.version))
$$;

-- A name's live permits, by slot.
CREATE OR REPLACE FUNCTION rq_lock_holders(p_name text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'slot', rq_lock_slot(k.key), 'owner', k.value->'owner', 'token', k.version,
               'since', k.value->'since', 'expiresAt', rq_iso(k.expires_at), 'renewedAt', k.value->'renewedAt')
               ORDER BY rq_lock_slot(k.key)), '[]')
    FROM rq_kv k
    WHERE k.namespace = 'queen-locks' AND rq_lock_permit_of(k.key, p_name, NULL) AND rq_kv_live(k.expires_at, now())
$$;

-- Take a permit: the one this owner already holds (a retried acquire whose answer was lost), or
-- the lowest free slot. Taking a slot whose permit expired starts a new lineage and token.
CREATE OR REPLACE FUNCTION rq_lock_acquire(p_name text, p_owner text, p_ttl int, p_limit int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now  timestamptz := now();
    v_row  rq_kv%ROWTYPE;
    v_slot int;
BEGIN
    SELECT * INTO v_row FROM rq_kv k
    WHERE k.namespace = 'queen-locks' AND k.key = ANY (ARRAY(SELECT p_name || '#' || s FROM generate_series(0, p_limit - 1) s))
      AND k.value->>'owner' = p_owner AND rq_kv_live(k.expires_at, v_now)
    ORDER BY k.key LIMIT 1;
    IF FOUND THEN
        RETURN jsonb_build_object('acquired', true, 'already', true, 'owner', p_owner)
               || rq_lock_granted(p_name, v_row);
    END IF;
    FOR v_slot IN 0 .. p_limit - 1 LOOP
        INSERT INTO rq_kv AS k (namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES ('queen-locks', p_name || '#' || v_slot,
                jsonb_build_object('owner', p_owner, 'since', rq_iso(v_now), 'renewedAt', rq_iso(v_now)),
                nextval('rq_kv_versions'), v_now + make_interval(secs => p_ttl), v_now, v_now)
        ON CONFLICT (namespace, key) DO UPDATE
            SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
                created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
            WHERE NOT rq_kv_live(k.expires_at, v_now)
        RETURNING k.* INTO v_row;
        IF FOUND THEN
            RETURN jsonb_build_object('acquired', true, 'owner', p_owner) || rq_lock_granted(p_name, v_row);
        END IF;
    END LOOP;
    RETURN jsonb_build_object('acquired', false, 'reason', 'held', 'holders', rq_lock_holders(p_name));
END;
$$;

-- Extend a live permit held at p_token (or, for a renew sent again after its answer was lost, by
-- p_owner): a new token and lifetime. p_slot NULL: whichever slot the token holds.
CREATE OR REPLACE FUNCTION rq_lock_renew(p_name text, p_token bigint, p_slot int, p_owner text, p_ttl int)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now  timestamptz := now();
    v_row  rq_kv%ROWTYPE;
BEGIN
    UPDATE rq_kv k SET version = nextval('rq_kv_versions'), expires_at = v_now + make_interval(secs => p_ttl),
                       updated_at = v_now, value = k.value || jsonb_build_object('renewedAt', rq_iso(v_now))
    WHERE k.ctid = (SELECT c.ctid FROM rq_kv c
                    WHERE c.namespace = 'queen-locks' AND rq_lock_permit_of(c.key, p_name, p_slot)
                      AND rq_kv_live(c.expires_at, v_now)
                      AND (c.version = p_token OR c.value->>'owner' = p_owner)
                    ORDER BY c.version = p_token DESC LIMIT 1 FOR UPDATE)
    RETURNING k.* INTO v_row;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('renewed', false, 'reason', 'lost', 'holders', rq_lock_holders(p_name));
    END IF;
    RETURN jsonb_build_object('renewed', true) || rq_lock_granted(p_name, v_row);
END;
$$;

-- Give back the live permit held at p_token.
CREATE OR REPLACE FUNCTION rq_lock_release(p_name text, p_token bigint, p_slot int) RETURNS jsonb
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_kv k
        WHERE k.namespace = 'queen-locks' AND rq_lock_permit_of(k.key, p_name, p_slot)
          AND k.version = p_token AND rq_kv_live(k.expires_at, now())
        RETURNING rq_lock_slot(k.key) AS slot
    )
    SELECT CASE WHEN EXISTS (SELECT 1 FROM gone)
                THEN jsonb_build_object('released', true, 'slot', (SELECT slot FROM gone LIMIT 1))
                ELSE jsonb_build_object('released', false, 'reason', 'lost') END
$$;
