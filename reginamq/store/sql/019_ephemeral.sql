-- Queen 2.x's ephemeral queues (engine/ephemeral.py): queues whose contents may be lost and are
-- cheap because of it. The contents live in UNLOGGED tables: no write-ahead log, shared by every
-- broker process and node on the database (no ring has an owner to forward to), and emptied by
-- PostgreSQL after a crash, which is the class's contract (contents survive nothing that is
-- promised; a clean restart happens to keep them). A declaration (configure) is an ordinary,
-- logged row: a declared queue comes back configured.
--
-- A ring is one (queue, partition): messages numbered from 1 in push order, under a ring row
-- whose lock orders the pushes and whose `epoch` names this incarnation of the ring (a reset,
-- a delete or a crash makes a new one, and a message id of an old one answers `stale`). Each
-- consumer group has a cursor per ring (the next message it has not been handed) and a lease row
-- per message handed out and not yet acknowledged. A message goes once every group that reads
-- the ring has passed it and holds no lease on it, or earlier by the queue's bounds and TTL.
CREATE TABLE IF NOT EXISTS rq_eph_declared (
    queue       text COLLATE "C" PRIMARY KEY,
    options     jsonb NOT NULL,               -- as declared: the seven options, validated
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE UNLOGGED TABLE IF NOT EXISTS rq_eph_rings (
    queue           text COLLATE "C" NOT NULL,
    partition       text COLLATE "C" NOT NULL,
    epoch           uuid NOT NULL DEFAULT gen_random_uuid(),
    next_seq        bigint NOT NULL DEFAULT 1,
    length          int NOT NULL DEFAULT 0,
    bytes           bigint NOT NULL DEFAULT 0,
    dropped_bounds  bigint NOT NULL DEFAULT 0,
    dropped_ttl     bigint NOT NULL DEFAULT 0,
    dropped_retry   bigint NOT NULL DEFAULT 0,
    touched_at      timestamptz NOT NULL DEFAULT now(),  -- the last push: idle empty rings are collected
    PRIMARY KEY (queue, partition)
);

CREATE UNLOGGED TABLE IF NOT EXISTS rq_eph_messages (
    queue      text COLLATE "C" NOT NULL,
    partition  text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    payload    text NOT NULL,                 -- the JSON as pushed, handed back verbatim
    bytes      int NOT NULL,
    pushed_at  timestamptz NOT NULL,
    PRIMARY KEY (queue, partition, seq)
);

CREATE UNLOGGED TABLE IF NOT EXISTS rq_eph_cursors (
    queue      text COLLATE "C" NOT NULL,
    grp        text COLLATE "C" NOT NULL,
    partition  text COLLATE "C" NOT NULL,
    next_seq   bigint NOT NULL,
    skipped    bigint NOT NULL DEFAULT 0,     -- messages the bounds or TTL took before this group read them
    PRIMARY KEY (queue, grp, partition)
);

CREATE UNLOGGED TABLE IF NOT EXISTS rq_eph_leases (
    queue        text COLLATE "C" NOT NULL,
    grp          text COLLATE "C" NOT NULL,
    partition    text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL,
    lease_until  timestamptz NOT NULL,        -- -infinity: redeliver now (a failed or retry ack)
    attempts     int NOT NULL,                -- deliveries so far
    PRIMARY KEY (queue, grp, partition, seq)
);

-- A queue's options in force: the declaration over the defaults (engine/ephemeral.py DEFAULTS).
CREATE OR REPLACE FUNCTION rq_eph_options(p_queue text, p_defaults jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT p_defaults || coalesce((SELECT jsonb_strip_nulls(d.options) FROM rq_eph_declared d WHERE d.queue = p_queue),
                                  '{}')
$$;

-- Forget a ring's messages older than the TTL, counted as dropped by age.
CREATE OR REPLACE FUNCTION rq_eph_expire(p_queue text, p_partition text, p_ttl int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_count int;
    v_bytes bigint;
BEGIN
    IF p_ttl <= 0 THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM rq_eph_messages m
        WHERE m.queue = p_queue AND m.partition = p_partition AND m.pushed_at < now() - make_interval(secs => p_ttl)
        RETURNING m.bytes
    )
    SELECT count(*), coalesce(sum(bytes), 0) INTO v_count, v_bytes FROM gone;
    IF v_count > 0 THEN
        UPDATE rq_eph_rings r SET length = r.length - v_count, bytes = r.bytes - v_bytes,
                                  dropped_ttl = r.dropped_ttl + v_count
        WHERE r.queue = p_queue AND r.partition = p_partition;
    END IF;
END;
$$;

-- Push one request's messages to a ring, all or nothing: the ring is created by naming it; over
-- its bounds the policy `reject` refuses the whole request (answers -1), `dropOldest` makes room
-- by dropping the oldest messages (a request larger than the bounds is refused either way).
-- Answers how many were pushed.
CREATE OR REPLACE FUNCTION rq_eph_push(p_queue text, p_partition text, p_payloads text[], p_sizes int[],
                                       p_defaults jsonb) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_opts   jsonb := rq_eph_options(p_queue, p_defaults);
    v_max_n  bigint := (v_opts->>'maxLength')::bigint;
    v_max_b  bigint := (v_opts->>'maxBytes')::bigint;
    v_n      int := cardinality(p_payloads);
    v_b      bigint := (SELECT sum(s) FROM unnest(p_sizes) s);
    v_ring   rq_eph_rings%ROWTYPE;
    v_count  int;
    v_bytes  bigint;
BEGIN
    IF (v_max_n > 0 AND v_n > v_max_n) OR (v_max_b > 0 AND v_b > v_max_b) THEN
        RETURN -1;
    END IF;
    LOOP  -- the ring, created by naming it; collected in between, it is created again
        INSERT INTO rq_eph_rings (queue, partition) VALUES (p_queue, p_partition) ON CONFLICT DO NOTHING;
        SELECT * INTO v_ring FROM rq_eph_rings r WHERE r.queue = p_queue AND r.partition = p_partition FOR UPDATE;
        EXIT WHEN FOUND;
    END LOOP;
    PERFORM rq_eph_expire(p_queue, p_partition, (v_opts->>'ttlSeconds')::int);
    SELECT * INTO v_ring FROM rq_eph_rings r WHERE r.queue = p_queue AND r.partition = p_partition;
    IF (v_max_n > 0 AND v_ring.length + v_n > v_max_n) OR (v_max_b > 0 AND v_ring.bytes + v_b > v_max_b) THEN
        IF v_opts->>'policy' = 'reject' THEN
            RETURN -1;
        END IF;
        -- the oldest messages whose going leaves room for the request
        WITH ordered AS (
            SELECT m.seq, m.bytes,
                   count(*) OVER (ORDER BY m.seq) AS n_before_and,
                   sum(m.bytes) OVER (ORDER BY m.seq) AS b_before_and
            FROM rq_eph_messages m WHERE m.queue = p_queue AND m.partition = p_partition
        ), doomed AS (
            SELECT o.seq FROM ordered o
            WHERE (v_max_n > 0 AND v_ring.length - o.n_before_and + 1 + v_n > v_max_n)
               OR (v_max_b > 0 AND v_ring.bytes - o.b_before_and + o.bytes + v_b > v_max_b)
        ), gone AS (
            DELETE FROM rq_eph_messages m USING doomed d
            WHERE m.queue = p_queue AND m.partition = p_partition AND m.seq = d.seq
            RETURNING m.bytes
        )
        SELECT count(*), coalesce(sum(bytes), 0) INTO v_count, v_bytes FROM gone;
        UPDATE rq_eph_rings r SET length = r.length - v_count, bytes = r.bytes - v_bytes,
                                  dropped_bounds = r.dropped_bounds + v_count
        WHERE r.queue = p_queue AND r.partition = p_partition;
    END IF;
    INSERT INTO rq_eph_messages (queue, partition, seq, payload, bytes, pushed_at)
    SELECT p_queue, p_partition, v_ring.next_seq + t.n - 1, t.payload, t.size, now()
    FROM unnest(p_payloads, p_sizes) WITH ORDINALITY AS t(payload, size, n);
    UPDATE rq_eph_rings r SET next_seq = r.next_seq + v_n, length = r.length + v_n, bytes = r.bytes + v_b,
                              touched_at = now()
    WHERE r.queue = p_queue AND r.partition = p_partition;
    RETURN v_n;
END;
$$;

-- Forget a ring's messages every group reading it has passed and none holds a lease on.
CREATE OR REPLACE FUNCTION rq_eph_trim(p_queue text, p_partition text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_count int;
    v_bytes bigint;
BEGIN
    WITH gone AS (
        DELETE FROM rq_eph_messages m
        WHERE m.queue = p_queue AND m.partition = p_partition
          AND m.seq < (SELECT min(c.next_seq) FROM rq_eph_cursors c WHERE c.queue = p_queue AND c.partition = p_partition)
          AND NOT EXISTS (SELECT 1 FROM rq_eph_leases l WHERE l.queue = p_queue AND l.partition = p_partition
                                                          AND l.seq = m.seq)
        RETURNING m.bytes
    )
    SELECT count(*), coalesce(sum(bytes), 0) INTO v_count, v_bytes FROM gone;
    IF v_count > 0 THEN
        UPDATE rq_eph_rings r SET length = r.length - v_count, bytes = r.bytes - v_bytes
        WHERE r.queue = p_queue AND r.partition = p_partition;
    END IF;
END;
$$;

-- Hand a group up to p_batch messages of a queue (of one partition, or of any, the rings with the
-- oldest waiting messages first; a ring another consumer of the group is serving is skipped):
-- first the group's messages due again (a lease expired, or a failed or retry ack), then new
-- ones in push order. A message past its deliveries (retryLimit + 1) is dropped instead. With
-- p_auto_ack nothing is leased: what is handed out is done. Answers
-- {messages: [{epoch, seq, partition, attempts, payload}], oldest, windowMs, windowCount}, oldest
-- being when the oldest message handed out was pushed (the pop lag of worker-metrics).
CREATE OR REPLACE FUNCTION rq_eph_pop(p_queue text, p_partition text, p_group text, p_batch int, p_auto_ack bool,
                                      p_defaults jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_opts    jsonb := rq_eph_options(p_queue, p_defaults);
    v_lease   interval := make_interval(secs => (v_opts->>'leaseSeconds')::int);
    v_tries   int := (v_opts->>'retryLimit')::int + 1;
    v_left    int := p_batch;
    v_out     jsonb := '[]';
    v_ring    rq_eph_rings%ROWTYPE;
    v_cursor  rq_eph_cursors%ROWTYPE;
    v_first   bigint;
    v_took    jsonb;
    v_n       int;
    v_dropped int;
    v_pushed  timestamptz;
    v_oldest  timestamptz;
BEGIN
    -- naming a queue creates it, a pop as much as a push (an implicit queue: depth knows it)
    IF NOT EXISTS (SELECT 1 FROM rq_eph_rings r WHERE r.queue = p_queue) THEN
        INSERT INTO rq_eph_rings (queue, partition) VALUES (p_queue, coalesce(p_partition, 'Default'))
        ON CONFLICT DO NOTHING;
    END IF;
    -- Without a partition, only the rings that may have something for the group are visited:
    -- one it has no cursor on yet (the visit makes it, so the ring keeps its messages for the
    -- group from then on), one pushed past its cursor, one where a lease of it fell due. A
    -- queue of thousands of caught-up rings then costs a pop two index probes a ring, not a visit.
    FOR v_ring IN
        SELECT r.* FROM rq_eph_rings r
        WHERE r.queue = p_queue AND (p_partition IS NULL OR r.partition = p_partition)
          AND (p_partition IS NOT NULL
               OR NOT EXISTS (SELECT 1 FROM rq_eph_cursors c
                              WHERE c.queue = r.queue AND c.grp = p_group AND c.partition = r.partition
                                AND c.next_seq >= r.next_seq)
               OR EXISTS (SELECT 1 FROM rq_eph_leases l
                          WHERE l.queue = r.queue AND l.grp = p_group AND l.partition = r.partition
                            AND l.lease_until <= now()))
        ORDER BY (SELECT min(m.pushed_at) FROM rq_eph_messages m
                  WHERE m.queue = r.queue AND m.partition = r.partition) NULLS LAST, r.partition
    LOOP
        EXIT WHEN v_left <= 0;
        -- held against collection while its cursor is made or moved (a push's update does not wait)
        SELECT * INTO v_ring FROM rq_eph_rings r WHERE r.queue = p_queue AND r.partition = v_ring.partition
        FOR KEY SHARE;
        CONTINUE WHEN NOT FOUND;
        PERFORM rq_eph_expire(p_queue, v_ring.partition, (v_opts->>'ttlSeconds')::int);
        SELECT coalesce(min(m.seq), v_ring.next_seq) INTO v_first FROM rq_eph_messages m
        WHERE m.queue = p_queue AND m.partition = v_ring.partition;
        INSERT INTO rq_eph_cursors (queue, grp, partition, next_seq) VALUES (p_queue, p_group, v_ring.partition, v_first)
        ON CONFLICT DO NOTHING;
        IF p_partition IS NULL THEN
            SELECT * INTO v_cursor FROM rq_eph_cursors c
            WHERE c.queue = p_queue AND c.grp = p_group AND c.partition = v_ring.partition FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        ELSE
            SELECT * INTO v_cursor FROM rq_eph_cursors c
            WHERE c.queue = p_queue AND c.grp = p_group AND c.partition = v_ring.partition FOR UPDATE;
        END IF;
        IF v_cursor.next_seq < v_first THEN  -- the bounds or the TTL took messages this group never saw
            UPDATE rq_eph_cursors c SET next_seq = v_first, skipped = c.skipped + (v_first - v_cursor.next_seq)
            WHERE c.queue = p_queue AND c.grp = p_group AND c.partition = v_ring.partition;
            v_cursor.next_seq := v_first;
        END IF;

        -- due again: past their deliveries they go; a lease whose message went is forgotten
        WITH due AS (
            SELECT l.seq, l.attempts FROM rq_eph_leases l
            WHERE l.queue = p_queue AND l.grp = p_group AND l.partition = v_ring.partition AND l.lease_until <= now()
        ), spent AS (
            DELETE FROM rq_eph_leases l USING due d
            WHERE l.queue = p_queue AND l.grp = p_group AND l.partition = v_ring.partition AND l.seq = d.seq
              AND (d.attempts >= v_tries OR NOT EXISTS (
                       SELECT 1 FROM rq_eph_messages m
                       WHERE m.queue = p_queue AND m.partition = v_ring.partition AND m.seq = d.seq))
            RETURNING d.attempts >= v_tries AS exhausted
        )
        SELECT count(*) FILTER (WHERE exhausted) INTO v_dropped FROM spent;
        IF v_dropped > 0 THEN
            UPDATE rq_eph_rings r SET dropped_retry = r.dropped_retry + v_dropped
            WHERE r.queue = p_queue AND r.partition = v_ring.partition;
        END IF;
        WITH again AS (
            SELECT l.seq FROM rq_eph_leases l
            WHERE l.queue = p_queue AND l.grp = p_group AND l.partition = v_ring.partition AND l.lease_until <= now()
            ORDER BY l.seq LIMIT v_left
        ), handed AS (
            UPDATE rq_eph_leases l SET attempts = l.attempts + 1, lease_until = now() + v_lease
            FROM again a
            WHERE l.queue = p_queue AND l.grp = p_group AND l.partition = v_ring.partition AND l.seq = a.seq
            RETURNING l.seq, l.attempts
        )
        SELECT coalesce(jsonb_agg(jsonb_build_object('epoch', v_ring.epoch, 'seq', h.seq, 'partition', v_ring.partition,
                                                     'attempts', h.attempts, 'payload', m.payload) ORDER BY h.seq), '[]'),
               count(*), min(m.pushed_at)
        INTO v_took, v_n, v_pushed
        FROM handed h JOIN rq_eph_messages m ON m.queue = p_queue AND m.partition = v_ring.partition AND m.seq = h.seq;
        v_out := v_out || v_took;
        v_left := v_left - v_n;
        v_oldest := least(v_oldest, v_pushed);
        IF p_auto_ack AND v_n > 0 THEN
            DELETE FROM rq_eph_leases l WHERE l.queue = p_queue AND l.grp = p_group AND l.partition = v_ring.partition
                                          AND l.lease_until > now() AND l.seq IN (
                SELECT (e->>'seq')::bigint FROM jsonb_array_elements(v_took) e);
        END IF;

        -- new ones, in push order
        IF v_left > 0 THEN
            SELECT coalesce(jsonb_agg(jsonb_build_object('epoch', v_ring.epoch, 'seq', m.seq, 'partition', m.partition,
                                                         'attempts', 1, 'payload', m.payload) ORDER BY m.seq), '[]'),
                   count(*), min(m.pushed_at)
            INTO v_took, v_n, v_pushed
            FROM (SELECT * FROM rq_eph_messages m
                  WHERE m.queue = p_queue AND m.partition = v_ring.partition AND m.seq >= v_cursor.next_seq
                  ORDER BY m.seq LIMIT v_left) m;
            IF v_n > 0 THEN
                UPDATE rq_eph_cursors c SET next_seq = (v_took->(v_n - 1)->>'seq')::bigint + 1
                WHERE c.queue = p_queue AND c.grp = p_group AND c.partition = v_ring.partition;
                IF NOT p_auto_ack THEN
                    INSERT INTO rq_eph_leases (queue, grp, partition, seq, lease_until, attempts)
                    SELECT p_queue, p_group, v_ring.partition, (e->>'seq')::bigint, now() + v_lease, 1
                    FROM jsonb_array_elements(v_took) e;
                END IF;
                v_out := v_out || v_took;
                v_left := v_left - v_n;
                v_oldest := least(v_oldest, v_pushed);
            END IF;
        END IF;
        PERFORM rq_eph_trim(p_queue, v_ring.partition);
    END LOOP;
    RETURN jsonb_build_object('messages', v_out, 'oldest', v_oldest, 'windowMs', coalesce((v_opts->'windowBuffer'->>'ms')::int, 0),
                              'windowCount', coalesce((v_opts->'windowBuffer'->>'count')::int, 0));
END;
$$;

-- Acknowledge a group's messages by (partition, epoch, seq): completed releases the message;
-- failed and retry make it due again at once. Outcomes: acked, redelivered, stale (the ring is
-- another incarnation, or gone), unknown (no lease of this group on it: acked already, or its
-- lease expired and it went to the retry budget's end).
CREATE OR REPLACE FUNCTION rq_eph_ack(p_queue text, p_group text, p_partitions text[], p_epochs uuid[],
                                      p_seqs bigint[], p_done bool[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_out   text[] := '{}';
    v_i     int;
    v_epoch uuid;
BEGIN
    FOR v_i IN 1 .. coalesce(cardinality(p_seqs), 0) LOOP
        SELECT r.epoch INTO v_epoch FROM rq_eph_rings r WHERE r.queue = p_queue AND r.partition = p_partitions[v_i];
        IF v_epoch IS DISTINCT FROM p_epochs[v_i] THEN
            v_out := array_append(v_out, 'stale');
        ELSIF p_done[v_i] THEN
            DELETE FROM rq_eph_leases l WHERE l.queue = p_queue AND l.grp = p_group
                                          AND l.partition = p_partitions[v_i] AND l.seq = p_seqs[v_i];
            v_out := array_append(v_out, CASE WHEN FOUND THEN 'acked' ELSE 'unknown' END);
        ELSE
            UPDATE rq_eph_leases l SET lease_until = '-infinity' WHERE l.queue = p_queue AND l.grp = p_group
                                                                    AND l.partition = p_partitions[v_i]
                                                                    AND l.seq = p_seqs[v_i];
            v_out := array_append(v_out, CASE WHEN FOUND THEN 'redelivered' ELSE 'unknown' END);
        END IF;
    END LOOP;
    PERFORM rq_eph_trim(p_queue, p) FROM (SELECT DISTINCT unnest(p_partitions) AS p) t;
    RETURN v_out;
END;
$$;

-- Drop a queue's contents, leases and cursors (its declaration stays); answers the messages dropped.
CREATE OR REPLACE FUNCTION rq_eph_reset(p_queue text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_dropped bigint;
BEGIN
    PERFORM 1 FROM rq_eph_rings r WHERE r.queue = p_queue ORDER BY r.partition FOR UPDATE;
    DELETE FROM rq_eph_leases l WHERE l.queue = p_queue;
    DELETE FROM rq_eph_cursors c WHERE c.queue = p_queue;
    WITH gone AS (DELETE FROM rq_eph_messages m WHERE m.queue = p_queue RETURNING 1)
    SELECT count(*) INTO v_dropped FROM gone;
    DELETE FROM rq_eph_rings r WHERE r.queue = p_queue;
    RETURN v_dropped;
END;
$$;

-- Delete a queue: its contents (rq_eph_reset) and its declaration. Answers whether there was
-- anything (a ring, a cursor or a declaration), and whether it was declared.
CREATE OR REPLACE FUNCTION rq_eph_delete(p_queue text, OUT deleted bool, OUT declared bool)
LANGUAGE plpgsql AS $$
BEGIN
    deleted := EXISTS (SELECT 1 FROM rq_eph_rings r WHERE r.queue = p_queue)
            OR EXISTS (SELECT 1 FROM rq_eph_cursors c WHERE c.queue = p_queue);
    PERFORM rq_eph_reset(p_queue);
    DELETE FROM rq_eph_declared d WHERE d.queue = p_queue;
    declared := FOUND;
    deleted := deleted OR declared;
END;
$$;

-- A queue's figures, or NULL when it is neither declared nor holds a ring or a cursor.
CREATE OR REPLACE FUNCTION rq_eph_depth(p_queue text, p_group text, p_defaults jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH rings AS (
        SELECT r.partition, r.length, r.bytes, r.dropped_bounds, r.dropped_ttl, r.dropped_retry,
               (SELECT count(*) FROM rq_eph_messages m
                WHERE m.queue = r.queue AND m.partition = r.partition
                  AND (p_group IS NULL OR m.seq >= coalesce((SELECT c.next_seq FROM rq_eph_cursors c
                                                             WHERE c.queue = r.queue AND c.grp = p_group
                                                               AND c.partition = r.partition), 0))) +
               (SELECT count(*) FROM rq_eph_leases l
                WHERE p_group IS NOT NULL AND l.queue = r.queue AND l.grp = p_group AND l.partition = r.partition)
                   AS pending
        FROM rq_eph_rings r WHERE r.queue = p_queue
    ), groups AS (
        SELECT c.grp,
               sum((SELECT count(*) FROM rq_eph_messages m WHERE m.queue = c.queue AND m.partition = c.partition
                                                            AND m.seq >= c.next_seq)
                   + (SELECT count(*) FROM rq_eph_leases l WHERE l.queue = c.queue AND l.grp = c.grp
                                                            AND l.partition = c.partition)) AS pending,
               sum(c.skipped) AS skipped
        FROM rq_eph_cursors c WHERE c.queue = p_queue GROUP BY c.grp
    ), declared AS (
        SELECT d.options FROM rq_eph_declared d WHERE d.queue = p_queue
    )
    SELECT CASE WHEN EXISTS (SELECT 1 FROM declared) OR EXISTS (SELECT 1 FROM rings) OR EXISTS (SELECT 1 FROM groups)
    THEN jsonb_build_object(
        'queue', p_queue, 'group', p_group,
        'tier', CASE WHEN EXISTS (SELECT 1 FROM declared) THEN 'declared' ELSE 'implicit' END,
        'pending', (SELECT coalesce(sum(pending), 0) FROM rings),
        'partitionsPending', (SELECT count(*) FROM rings WHERE pending > 0),
        'depth', (SELECT coalesce(sum(length), 0) FROM rings),
        'bytes', (SELECT coalesce(sum(bytes), 0) FROM rings),
        'partitions', (SELECT coalesce(jsonb_agg(jsonb_build_object('partition', partition, 'pending', pending,
                                                                    'bytes', bytes) ORDER BY partition), '[]')
                       FROM rings),
        'groups', (SELECT coalesce(jsonb_agg(jsonb_build_object('group', grp, 'pending', pending, 'skipped', skipped)
                                             ORDER BY grp), '[]') FROM groups),
        'drops', jsonb_build_object('bounds', (SELECT coalesce(sum(dropped_bounds), 0) FROM rings),
                                    'ttl', (SELECT coalesce(sum(dropped_ttl), 0) FROM rings),
                                    'retry', (SELECT coalesce(sum(dropped_retry), 0) FROM rings)),
        'options', rq_eph_options(p_queue, p_defaults))
    END
$$;

-- Every ephemeral queue: declared, or holding a ring or a cursor.
CREATE OR REPLACE FUNCTION rq_eph_list(p_defaults jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH names AS (
        SELECT queue FROM rq_eph_declared UNION SELECT queue FROM rq_eph_rings UNION SELECT queue FROM rq_eph_cursors
    ), listed AS (
        SELECT n.queue, rq_eph_depth(n.queue, NULL, p_defaults) AS d FROM names n
    )
    SELECT jsonb_build_object(
        'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                      'queue', l.queue, 'tier', l.d->'tier', 'depth', l.d->'depth', 'bytes', l.d->'bytes',
                      'partitions', jsonb_array_length(l.d->'partitions'), 'groups', jsonb_array_length(l.d->'groups'),
                      'drops', l.d->'drops', 'options', l.d->'options') ORDER BY l.queue) FROM listed l), '[]'),
        'count', (SELECT count(*) FROM names),
        'cellBytes', (SELECT coalesce(sum(bytes), 0) FROM rq_eph_rings))
$$;

-- Forget up to p_limit rings that hold nothing, lease nothing and had no push for p_idle_seconds,
-- with their groups' cursors: an inbox made for one reply does not stay a row forever. A ring
-- that is named again starts anew (a new epoch, from message 1); a pop or push at work on one
-- holds it. The stats loop runs it in bounded steps.
CREATE OR REPLACE FUNCTION rq_eph_collect_step(p_limit int, p_idle_seconds int) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_eph_rings r WHERE r.ctid IN (
            SELECT i.ctid FROM rq_eph_rings i
            WHERE i.length = 0 AND i.touched_at < now() - make_interval(secs => p_idle_seconds)
              AND NOT EXISTS (SELECT 1 FROM rq_eph_leases l WHERE l.queue = i.queue AND l.partition = i.partition)
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED)
        RETURNING r.queue, r.partition
    ), cursors AS (
        DELETE FROM rq_eph_cursors c USING gone g WHERE c.queue = g.queue AND c.partition = g.partition
    )
    SELECT count(*)::int FROM gone
$$;
