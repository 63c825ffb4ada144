-- Queen 2.x's timers (engine/timers.py): a message that enters its queue at a later time. Until
-- then it waits here under its (queue, timer key), where it can be cancelled or rescheduled;
-- when it is due, the fire (maintenance/timer_fire.py) deletes the row and pushes the message in
-- one transaction, so a timer is pending or delivered, never both and never neither. The
-- message's transactionId (txn) and id are fixed when it is scheduled, so a client can find the
-- delivered message without asking again.
CREATE TABLE IF NOT EXISTS rq_timers (
    queue        text COLLATE "C" NOT NULL,   -- need not exist yet: the fire's push creates it
    timer_key    text COLLATE "C" NOT NULL,
    partition    text NOT NULL,
    payload      bytea NOT NULL,              -- the message's JSON, as it will be pushed
    txn          text NOT NULL,
    message_id   uuid NOT NULL,
    deliver_at   timestamptz NOT NULL,
    attempts     int NOT NULL DEFAULT 0,      -- fires refused (a full queue), each backed off
    last_error   text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (queue, timer_key)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500, vacuum_truncate = off);
CREATE INDEX IF NOT EXISTS rq_timers_due ON rq_timers (deliver_at);

CREATE OR REPLACE FUNCTION rq_timer_json(p_row rq_timers) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('queue', p_row.queue, 'timerKey', p_row.timer_key, 'partition', p_row.partition,
                              'txn', p_row.txn, 'messageId', p_row.message_id, 'deliverAt', rq_iso(p_row.deliver_at),
                              'attempts', p_row.attempts, 'lastError', p_row.last_error,
                              'createdAt', rq_iso(p_row.created_at), 'updatedAt', rq_iso(p_row.updated_at))
$$;

-- Lock a timer's row for a change, or say the fire has it: a row that is due and locked is being
-- delivered right now (too late to change); any other lock is waited for.
CREATE OR REPLACE FUNCTION rq_timer_lock(p_queue text, p_key text, OUT present bool, OUT too_late bool)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM rq_timers t WHERE t.queue = p_queue AND t.timer_key = p_key FOR UPDATE SKIP LOCKED;
    present := FOUND;
    too_late := false;
    IF NOT present THEN
        too_late := EXISTS (SELECT 1 FROM rq_timers t WHERE t.queue = p_queue AND t.timer_key = p_key
                                                        AND t.deliver_at <= now());
        IF NOT too_late THEN
            PERFORM 1 FROM rq_timers t WHERE t.queue = p_queue AND t.timer_key = p_key FOR UPDATE;
            present := FOUND;
        END IF;
    END IF;
END;
$$;

-- Schedule (an upsert: a key scheduled again is rescheduled, with its new txn, payload and time,
-- and its attempts back at 0) or cancel, op by op in the order given, inside the caller's
-- transaction. Each op: {i, op, queue, key, partition, payload (base64), txn, messageId, delayMs}.
CREATE OR REPLACE FUNCTION rq_timers_apply(p_ops jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_out  jsonb := '[]'::jsonb;
    v_op   jsonb;
    v_lock record;
    v_row  rq_timers%ROWTYPE;
    v_res  jsonb;
BEGIN
    FOR v_op IN SELECT e FROM jsonb_array_elements(p_ops) AS t(e) LOOP
        SELECT * INTO v_lock FROM rq_timer_lock(v_op->>'queue', v_op->>'key');
        IF v_lock.too_late THEN
            v_res := jsonb_build_object('ok', false, 'status', 'too_late', 'txn', v_op->'txn');
        ELSIF v_op->>'op' = 'cancel' THEN
            DELETE FROM rq_timers t WHERE t.queue = v_op->>'queue' AND t.timer_key = v_op->>'key' RETURNING * INTO v_row;
            v_res := CASE WHEN FOUND THEN jsonb_build_object('ok', true, 'status', 'cancelled', 'txn', v_row.txn,
                                                             'messageId', v_row.message_id)
                          ELSE jsonb_build_object('ok', false, 'status', 'absent', 'txn', v_op->'txn') END;
        ELSE
            INSERT INTO rq_timers AS t (queue, timer_key, partition, payload, txn, message_id, deliver_at,
                                        created_at, updated_at)
            VALUES (v_op->>'queue', v_op->>'key', v_op->>'partition', decode(v_op->>'payload', 'base64'),
                    v_op->>'txn', (v_op->>'messageId')::uuid,
                    clock_timestamp() + make_interval(secs => (v_op->>'delayMs')::float8 / 1000), now(), now())
            ON CONFLICT (queue, timer_key) DO UPDATE
                SET partition = EXCLUDED.partition, payload = EXCLUDED.payload, txn = EXCLUDED.txn,
                    message_id = EXCLUDED.message_id, deliver_at = EXCLUDED.deliver_at, attempts = 0,
                    last_error = NULL, updated_at = EXCLUDED.updated_at
            RETURNING * INTO v_row;
            v_res := jsonb_build_object('ok', true, 'status', CASE WHEN v_lock.present THEN 'rescheduled' ELSE 'scheduled' END,
                                        'txn', v_row.txn, 'messageId', v_row.message_id, 'partition', v_row.partition,
                                        'deliverAt', rq_iso(v_row.deliver_at));
        END IF;
        v_out := v_out || jsonb_build_array(jsonb_build_object('index', (v_op->>'i')::int, 'op', v_op->>'op',
                                                                'queue', v_op->>'queue', 'timerKey', v_op->>'key') || v_res);
    END LOOP;
    RETURN v_out;
END;
$$;

-- Take up to p_limit due timers, oldest first, for the caller's transaction to push; a timer
-- another fire holds is skipped.
CREATE OR REPLACE FUNCTION rq_timers_take_due(p_limit int)
RETURNS TABLE (queue text, timer_key text, partition text, payload bytea, txn text, message_id uuid)
LANGUAGE sql AS $$
    DELETE FROM rq_timers t WHERE t.ctid IN (
        SELECT d.ctid FROM rq_timers d WHERE d.deliver_at <= now() ORDER BY d.deliver_at LIMIT p_limit
        FOR UPDATE SKIP LOCKED)
    RETURNING t.queue, t.timer_key, t.partition, t.payload, t.txn, t.message_id
$$;

-- The due timers of queues whose push was refused wait before the next try: 1 s, 2 s, 4 s, ... up
-- to a minute; what refused them is kept for peek and list.
CREATE OR REPLACE FUNCTION rq_timers_back_off(p_queues text[], p_error text) RETURNS int
LANGUAGE sql AS $$
    WITH moved AS (
        UPDATE rq_timers t SET attempts = t.attempts + 1, last_error = p_error, updated_at = now(),
                               deliver_at = now() + make_interval(secs => least(60, 2 ^ least(t.attempts, 6)))
        WHERE t.queue = ANY (p_queues) AND t.deliver_at <= now()
        RETURNING 1
    )
    SELECT count(*)::int FROM moved
$$;

CREATE OR REPLACE FUNCTION rq_timer_peek(p_queue text, p_key text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT rq_timer_json(t) || jsonb_build_object('found', true, 'encrypted', false,
                                                                    'payload', encode(t.payload, 'base64'))
                     FROM rq_timers t WHERE t.queue = p_queue AND t.timer_key = p_key),
                    jsonb_build_object('found', false, 'queue', p_queue, 'timerKey', p_key))
$$;

-- A page of a queue's pending timers in byte order of their keys, after the exclusive cursor.
CREATE OR REPLACE FUNCTION rq_timers_list(p_queue text, p_after text, p_limit int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH page AS (
        SELECT t, t.timer_key, row_number() OVER (ORDER BY t.timer_key) AS n
        FROM rq_timers t
        WHERE t.queue = p_queue AND (p_after IS NULL OR t.timer_key > p_after)
        ORDER BY t.timer_key
        LIMIT p_limit + 1
    )
    SELECT jsonb_build_object(
        'queue', p_queue,
        'rows', coalesce((SELECT jsonb_agg(rq_timer_json(p.t) ORDER BY p.timer_key) FROM page p WHERE p.n <= p_limit), '[]'),
        'truncated', (SELECT count(*) FROM page) > p_limit,
        'nextAfter', CASE WHEN (SELECT count(*) FROM page) > p_limit
                          THEN (SELECT p.timer_key FROM page p WHERE p.n = p_limit) END)
$$;
