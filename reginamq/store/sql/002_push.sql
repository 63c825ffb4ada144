-- Locks these partitions in ascending id order; returns how many exist. Generic plan: over an
-- array argument a custom plan always looks cheaper and would be planned afresh on every push
-- (see rq_pop_hinted, 003_pop.sql).
CREATE OR REPLACE FUNCTION rq_lock_partitions(p_ids uuid[])
RETURNS bigint LANGUAGE sql SET plan_cache_mode = force_generic_plan AS $$
    SELECT count(*) FROM (SELECT 1 FROM rq_partitions WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE) l
$$;

-- Creates the queues of these names that do not exist, with these options; a name's
-- namespace and task are its parts before and after a dot. Over several member databases
-- (store/homes.py) each queue gets the id the catalog gave it (p_id), so that a queue has one
-- id on every member, and the member's own numbering moves past them. Generic plans, as
-- rq_lock_partitions.
CREATE OR REPLACE FUNCTION rq_provision_queues(p_queue text[], p_new_queue_options jsonb, p_id bigint[] DEFAULT NULL)
RETURNS void LANGUAGE sql SET plan_cache_mode = force_generic_plan AS $$
    INSERT INTO rq_queues (id, name, namespace, task, options) OVERRIDING SYSTEM VALUE
    SELECT coalesce(n.id, nextval(pg_get_serial_sequence('rq_queues', 'id'))), n.qname,
           CASE WHEN position('.' IN n.qname) > 0 THEN split_part(n.qname, '.', 1) END,
           CASE WHEN position('.' IN n.qname) > 0 THEN nullif(split_part(n.qname, '.', 2), '') END,
           p_new_queue_options
    FROM (SELECT DISTINCT ON (u.qname) u.qname, u.id FROM unnest(p_queue, p_id) AS u(qname, id)) n
    WHERE NOT EXISTS (SELECT 1 FROM rq_queues q WHERE q.name = n.qname)
    ON CONFLICT DO NOTHING;

    SELECT setval(pg_get_serial_sequence('rq_queues', 'id'), (SELECT max(id) FROM rq_queues))
    WHERE p_id IS NOT NULL AND EXISTS (SELECT 1 FROM rq_queues);
$$;

-- Over several member databases, a partition that moved to another member (021_moves.sql)
-- is not created here again: a broker that routed its name here from a cache older than the
-- move is told so (RQ410), forgets the name and looks it up again (store/homes.py).
CREATE OR REPLACE FUNCTION rq_refuse_moved(p_queue text[], p_partition text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_queue, p_partition) AS g(qname, pname)
               JOIN rq_queues q ON q.name = g.qname
               JOIN rq_moved m ON m.queue_id = q.id AND m.name = g.pname
               WHERE NOT EXISTS (SELECT 1 FROM rq_partitions p WHERE p.queue_id = q.id AND p.name = g.pname)) THEN
        RAISE EXCEPTION 'a partition of this push moved to another member database' USING ERRCODE = 'RQ410';
    END IF;
END;
$$;

-- Creates the queues and partitions a push names, only when an existence check misses. Generic
-- plans, as rq_lock_partitions.
CREATE OR REPLACE FUNCTION rq_provision(p_queue text[], p_partition text[], p_new_queue_options jsonb)
RETURNS void LANGUAGE sql SET plan_cache_mode = force_generic_plan AS $$
    SELECT rq_provision_queues(p_queue, p_new_queue_options);
    SELECT rq_refuse_moved(p_queue, p_partition);

    WITH created AS (
        INSERT INTO rq_partitions (queue_id, name)
        SELECT DISTINCT q.id, g.pname
        FROM unnest(p_queue, p_partition) AS g(qname, pname)
        JOIN rq_queues q ON q.name = g.qname
        WHERE NOT EXISTS (SELECT 1 FROM rq_partitions p WHERE p.queue_id = q.id AND p.name = g.pname)
        ON CONFLICT (queue_id, name) DO NOTHING
        RETURNING queue_id
    )
    INSERT INTO rq_stats_notes (queue_id, partitions)  -- for the statistics (012_stats.sql)
    SELECT c.queue_id, count(*) FROM created c GROUP BY c.queue_id;
$$;

-- Push: one call per request (or per fused flush of requests, or a transaction's push).
-- The (queue, partition) pairs a push names come once each (p_queue, p_partition); every item
-- points at its pair (p_group, 1-based), so names are looked up once per pair, not per item.
-- Items arrive in request order, already free of in-request duplicates. Queues and partitions
-- a push names are created on first sight; partitions are locked in ascending id order (the
-- order acks also use), so concurrent pushes never deadlock. Each partition's items become
-- one segment row. Returns the items that were duplicates, with the original message id, and
-- the notices announcing what was written.
CREATE OR REPLACE FUNCTION rq_push(
    p_queue      text[],
    p_partition  text[],
    p_group      int[],
    p_txid       text[],
    p_bucket     text[],  -- each key's run bucket, NULL for a key kept a row a key (store/dedup_keys.py)
    p_msg_id     uuid[],
    p_payload    bytea[],
    p_new_queue_options jsonb,
    p_enforce_max_size bool,
    -- over several members: the directory's id of each pair that was listed for this push
    -- (NULL for the others, or none at all), which this member creates with that id
    p_listed_ids uuid[] DEFAULT NULL
) RETURNS TABLE (item int, original_id uuid, notice text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now     timestamptz;
    v_group_pids    uuid[];
    v_group_windows int[];
    v_group_sealed  bool[];
    v_pids    uuid[];
    v_windows int[];
    v_item_queues text[];
    v_fresh   bool[];
    v_keys    uuid[];
    v_seen    bigint[];
    v_run_keys bool;
    v_row_keys bool;
    v_attempt int;
    v_full    jsonb;
    v_size_limited bool;
BEGIN
    -- Resolve each pair's partition, dedup window and the queue options below need, once. A
    -- pair not found is created and the lookup made again: first the pairs listed for this
    -- push, with their listed ids (rq_provision_listed, 020_members.sql), then any still
    -- missing, of this database's own numbers (rq_provision). Looking first costs a push to
    -- existing partitions (nearly every push) one statement instead of the calls and theirs.
    FOR v_attempt IN 1..3 LOOP
        SELECT array_agg(p.id ORDER BY g.ord), array_agg(q.dedup_window_seconds ORDER BY g.ord),
               array_agg(coalesce(q.encryption_enabled, false) ORDER BY g.ord), bool_or(q.max_size > 0)
        INTO v_group_pids, v_group_windows, v_group_sealed, v_size_limited
        FROM unnest(p_queue, p_partition) WITH ORDINALITY AS g(qname, pname, ord)
        JOIN rq_queues q ON q.name = g.qname
        JOIN rq_partitions p ON p.queue_id = q.id AND p.name = g.pname;
        EXIT WHEN coalesce(cardinality(v_group_pids), 0) = cardinality(p_queue);
        IF v_attempt = 3 THEN
            -- the idle cleanup deleted a partition rq_provision had found or created: retry whole
            RAISE EXCEPTION 'a partition of this push was deleted meanwhile' USING ERRCODE = '40001';
        ELSIF v_attempt = 1 AND p_listed_ids IS NOT NULL THEN
            PERFORM rq_provision_listed(p_queue, p_partition, p_listed_ids);
        ELSE
            PERFORM rq_provision(p_queue, p_partition, p_new_queue_options);
        END IF;
    END LOOP;
    SELECT array_agg(v_group_pids[t.g] ORDER BY t.ord), array_agg(v_group_windows[t.g] ORDER BY t.ord)
    INTO v_pids, v_windows
    FROM unnest(p_group) WITH ORDINALITY AS t(g, ord);

    -- An encrypted queue stores sealed fragments only: byte 43 (after '"id":"<uuid>"') is 0 in
    -- a sealed fragment and a comma in a plaintext one. The broker seals; this makes sure.
    IF true = ANY (v_group_sealed) AND EXISTS (
            SELECT 1 FROM unnest(p_group, p_payload) AS t(g, payload)
            WHERE v_group_sealed[t.g] AND get_byte(t.payload, 43) <> 0) THEN
        RAISE EXCEPTION 'plaintext payload for an encrypted queue' USING ERRCODE = 'RQ428';
    END IF;

    -- The write lock, in the global order. A partition the idle cleanup deleted after the
    -- lookups above (rq_retention_step, 007_maintenance.sql) is missing here: the call is
    -- retried whole (40001, see store/database.py), and the retry creates it afresh.
    IF rq_lock_partitions(v_group_pids) < cardinality(v_group_pids) THEN  -- the pairs are distinct, so are their partitions
        RAISE EXCEPTION 'a partition of this push was deleted meanwhile' USING ERRCODE = '40001';
    END IF;
    v_now := clock_timestamp();  -- after the lock: monotone per partition

    -- Deduplication inside each queue's window: a live key stays, an expired key is taken over.
    -- UUIDv7 keys are looked for, and written, in runs (rq_dedup_runs, 001_queues_and_partitions.sql):
    -- the runs of their (partition, bucket) that are still live. The others are a row a key.
    v_fresh := array_fill(true, ARRAY[cardinality(p_group)]);
    SELECT coalesce(bool_or(t.bucket IS NOT NULL), false), coalesce(bool_or(t.bucket IS NULL), false)
    INTO v_run_keys, v_row_keys
    FROM unnest(v_windows, p_bucket) AS t(win, bucket) WHERE t.win > 0;
    IF v_run_keys THEN
        -- each run key as a uuid, once (NULL: no window, or a row key)
        SELECT array_agg(CASE WHEN t.win > 0 AND t.bucket IS NOT NULL THEN t.txid::uuid END ORDER BY t.ord)
        INTO v_keys
        FROM unnest(p_txid, p_bucket, v_windows) WITH ORDINALITY AS t(txid, bucket, win, ord);
        WITH items AS (
            SELECT t.ord, t.pid, t.bucket, t.key
            FROM unnest(v_pids, p_bucket, v_keys) WITH ORDINALITY AS t(pid, bucket, key, ord)
            WHERE t.key IS NOT NULL
        ), stored AS (
            SELECT b.pid, k.key
            FROM (SELECT DISTINCT i.pid, i.bucket FROM items i) b
            JOIN rq_dedup_runs r ON r.partition_id = b.pid AND r.bucket = b.bucket AND r.expires_at > v_now
            CROSS JOIN LATERAL unnest(r.keys) AS k(key)
        )
        SELECT array_agg(i.ord) INTO v_seen
        FROM items i WHERE (i.pid, i.key) IN (SELECT s.pid, s.key FROM stored s);

        INSERT INTO rq_dedup_runs (partition_id, bucket, expires_at, keys, message_ids)
        SELECT t.pid, t.bucket, v_now + make_interval(secs => t.win), array_agg(t.key), array_agg(t.msg_id)
        FROM unnest(v_pids, p_bucket, v_keys, v_windows, p_msg_id) WITH ORDINALITY
             AS t(pid, bucket, key, win, msg_id, ord)
        WHERE t.key IS NOT NULL AND t.ord <> ALL (coalesce(v_seen, '{}'))
        GROUP BY t.pid, t.bucket, t.win;
        IF v_seen IS NOT NULL THEN
            SELECT array_agg(t.ord <> ALL (v_seen) ORDER BY t.ord) INTO v_fresh
            FROM unnest(p_group) WITH ORDINALITY AS t(g, ord);
        END IF;
    END IF;
    -- A row a key: nearly every key is new, and a plain insert costs a key less than an ON
    -- CONFLICT insert's speculative one (no pre-check of the index, no confirmation record);
    -- only when some key already exists (the unique violation rolls the plain insert back) does
    -- the push take the ON CONFLICT path.
    IF v_row_keys THEN
        BEGIN
            INSERT INTO rq_dedup (partition_id, transaction_id, message_id, expires_at)
            SELECT t.pid, t.txid, t.msg_id, v_now + make_interval(secs => t.win)
            FROM unnest(v_pids, p_txid, p_msg_id, v_windows, p_bucket) AS t(pid, txid, msg_id, win, bucket)
            WHERE t.win > 0 AND t.bucket IS NULL;
        EXCEPTION WHEN unique_violation THEN
            WITH claimed AS (
                INSERT INTO rq_dedup AS d (partition_id, transaction_id, message_id, expires_at)
                SELECT t.pid, t.txid, t.msg_id, v_now + make_interval(secs => t.win)
                FROM unnest(v_pids, p_txid, p_msg_id, v_windows, p_bucket) AS t(pid, txid, msg_id, win, bucket)
                WHERE t.win > 0 AND t.bucket IS NULL
                ON CONFLICT (partition_id, transaction_id) DO UPDATE
                    SET message_id = EXCLUDED.message_id, expires_at = EXCLUDED.expires_at
                    WHERE d.expires_at <= v_now
                RETURNING d.partition_id, d.transaction_id
            )
            SELECT array_agg(t.fresh AND (coalesce(t.win, 0) <= 0 OR t.bucket IS NOT NULL
                                          OR EXISTS (SELECT 1 FROM claimed c
                                                     WHERE c.partition_id = t.pid AND c.transaction_id = t.txid))
                             ORDER BY t.ord)
            INTO v_fresh
            FROM unnest(v_pids, p_txid, v_windows, p_bucket, v_fresh) WITH ORDINALITY
                 AS t(pid, txid, win, bucket, fresh, ord);
        END;
    END IF;

    -- maxSize: a queue holds at most that many unconsumed messages. Pushes to such a queue
    -- are serialised (an advisory lock per queue, taken in id order after every partition
    -- lock, so no cycle), and a push that would go past the limit is refused whole: the
    -- exception rolls back everything this call (or its transaction bundle) wrote.
    -- Unconsumed: beyond the slowest cursor of each partition (rq_pending, 003_pop.sql).
    IF p_enforce_max_size AND v_size_limited THEN
        v_item_queues := ARRAY(SELECT p_queue[g] FROM unnest(p_group) g);
        PERFORM pg_advisory_xact_lock(1366, q.id::int)
        FROM rq_queues q WHERE q.name = ANY (p_queue) AND q.max_size > 0 ORDER BY q.id;
        SELECT jsonb_agg(jsonb_build_object('queue', f.name, 'maxSize', f.max_size, 'size', f.size,
                                            'incoming', f.incoming))
        INTO v_full
        FROM (
            SELECT q.name, q.max_size, n.incoming,
                   (SELECT coalesce(sum(rq_pending(p.last_offset, p.log_start,
                                                   rq_first_offset(p.id, p.log_start, p.last_offset),
                                                   (SELECT min(c.committed) FROM rq_consumers c
                                                    WHERE c.partition_id = p.id))), 0)
                    FROM rq_partitions p WHERE p.queue_id = q.id) AS size
            FROM (SELECT t.qname, count(*) AS incoming FROM unnest(v_item_queues, v_fresh) AS t(qname, fresh)
                  WHERE t.fresh GROUP BY t.qname) n
            JOIN rq_queues q ON q.name = n.qname
            WHERE q.max_size > 0
        ) f
        WHERE f.size + f.incoming > f.max_size;
        IF v_full IS NOT NULL THEN
            RAISE EXCEPTION 'queue full' USING ERRCODE = 'RQ409', DETAIL = v_full::text;
        END IF;
    END IF;

    WITH items AS (
        SELECT t.* FROM unnest(v_pids, p_txid, p_payload, v_fresh) WITH ORDINALITY
                        AS t(pid, txid, payload, fresh, ord)
        WHERE t.fresh
    ), counts AS (
        SELECT pid, count(*) AS n FROM items GROUP BY pid
    ), bumped AS (
        UPDATE rq_partitions p
        SET last_offset = p.last_offset + c.n,
            last_write_at = CASE WHEN p.last_write_at > v_now - interval '1 second'
                                 THEN p.last_write_at ELSE v_now END
        FROM counts c WHERE p.id = c.pid
        RETURNING p.id, p.queue_id, c.n, p.last_offset - c.n + 1 AS base_offset, p.last_offset AS end_offset
    ), noted AS (
        INSERT INTO rq_stats_notes (queue_id, pushed)  -- for the statistics (012_stats.sql)
        SELECT b.queue_id, sum(b.n) FROM bumped b GROUP BY b.queue_id
    )
    INSERT INTO rq_segments (partition_id, base_offset, end_offset, created_at, txids, payloads)
    SELECT b.id, b.base_offset, b.end_offset, v_now,
           array_agg(i.txid ORDER BY i.ord), array_agg(i.payload ORDER BY i.ord)
    FROM bumped b JOIN items i ON i.pid = b.id
    GROUP BY b.id, b.base_offset, b.end_offset;

    -- Wake-ups and hints (engine/waiters.py, engine/hot_partitions.py) come back as notices for the
    -- broker to send once this transaction has committed (engine/push.py, announce): a
    -- pg_notify here would hold PostgreSQL's notification lock, which serialises every
    -- notifying commit, through this commit's flush to disk. A notice is the queue, a newline
    -- and the partitions written, 150 to a notice (a notification holds 8,000 bytes).
    RETURN QUERY
    SELECT NULL::int, NULL::uuid, w.qname || E'\n' || string_agg(w.pid::text, ',')
    FROM (SELECT g.qname, g.pid, (row_number() OVER (PARTITION BY g.qname ORDER BY g.pid) - 1) / 150 AS chunk
          FROM (SELECT DISTINCT p_queue[t.g] AS qname, v_group_pids[t.g] AS pid
                FROM unnest(p_group, v_fresh) AS t(g, fresh) WHERE t.fresh) g) w
    GROUP BY w.qname, w.chunk;

    -- Duplicates come back with the id of the message already stored: the broker minted
    -- every other id itself.
    IF false = ANY (v_fresh) THEN
        RETURN QUERY
        SELECT (t.ord - 1)::int, d.message_id, NULL::text
        FROM unnest(v_pids, p_txid, v_fresh, p_bucket) WITH ORDINALITY AS t(pid, txid, fresh, bucket, ord)
        JOIN rq_dedup d ON d.partition_id = t.pid AND d.transaction_id = t.txid
        WHERE NOT t.fresh AND t.bucket IS NULL;
        RETURN QUERY
        SELECT (t.ord - 1)::int, k.message_id, NULL::text
        FROM unnest(v_pids, v_keys, v_fresh, p_bucket) WITH ORDINALITY AS t(pid, key, fresh, bucket, ord)
        JOIN rq_dedup_runs r ON r.partition_id = t.pid AND r.bucket = t.bucket AND r.expires_at > v_now
        CROSS JOIN LATERAL unnest(r.keys, r.message_ids) AS k(key, message_id)
        WHERE NOT t.fresh AND t.key IS NOT NULL AND k.key = t.key;
    END IF;
END;
$$;
