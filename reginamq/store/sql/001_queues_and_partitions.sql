-- The log engine: one row per queue, per partition, per push group of a partition (segment),
-- per (partition, consumer group) cursor and per durable subscription; the deduplication keys;
-- and what the hot paths (push, pop, ack) leave for the statistics. Every function of the hot
-- paths reads or writes these tables, so they come first. Everything here is idempotent: it
-- runs whenever the schema files change, under an advisory lock (store/database.py).

-- Data changes that must happen once per database (a stored value that a new version reads
-- differently): each is a DO block placed after the table it changes, which does its work only
-- when its name is not recorded here yet and then records it. First, so that any file may hold
-- one:
--     IF NOT EXISTS (SELECT 1 FROM rq_migrations WHERE name = '<name>') THEN
--         <the change>; INSERT INTO rq_migrations (name) VALUES ('<name>');
--     END IF;
CREATE TABLE IF NOT EXISTS rq_migrations (
    name        text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- A queue and its options as configured (jsonb, as Queen stores them). The options the SQL
-- enforces are generated columns, so each is worked out in one place.
CREATE TABLE IF NOT EXISTS rq_queues (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    namespace     text,
    task          text,
    options       jsonb NOT NULL,
    lease_time            int  GENERATED ALWAYS AS ((options->>'leaseTime')::int) STORED,
    retry_limit           int  GENERATED ALWAYS AS ((options->>'retryLimit')::int) STORED,
    dlq_enabled           bool GENERATED ALWAYS AS ((options->>'deadLetterQueue')::bool
                                                    OR (options->>'dlqAfterMaxRetries')::bool) STORED,
    delayed_processing    int  GENERATED ALWAYS AS ((options->>'delayedProcessing')::int) STORED,
    window_buffer         int  GENERATED ALWAYS AS ((options->>'windowBuffer')::int) STORED,
    dedup_window_seconds  int  GENERATED ALWAYS AS ((options->>'dedupWindowSeconds')::int) STORED,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- Options that go beyond Queen (it stores them without enforcing them): ttl (seconds; older
    -- messages are skipped at delivery and counted as expired), maxSize (messages a queue may
    -- hold unconsumed; pushes beyond it are refused whole), retryDelay (milliseconds a released
    -- failed span stays invisible), minPopWaitTime (milliseconds a long poll may hold an
    -- under-full batch), encryptionEnabled (the broker seals payloads, engine/encryption.py, and
    -- rq_push refuses plaintext).
    ttl_seconds           int  GENERATED ALWAYS AS ((options->>'ttl')::int) STORED,
    max_size              int  GENERATED ALWAYS AS ((options->>'maxSize')::int) STORED,
    retry_delay_ms        bigint GENERATED ALWAYS AS ((options->>'retryDelay')::bigint) STORED,
    min_pop_wait_ms       int  GENERATED ALWAYS AS ((options->>'minPopWaitTime')::int) STORED,
    encryption_enabled    bool GENERATED ALWAYS AS ((options->>'encryptionEnabled')::bool) STORED,
    -- What retention enforces (007_maintenance.sql): retentionSeconds only with retentionEnabled;
    -- completedRetentionSeconds on its own (Queen's soak configures just that key);
    -- maxWaitTimeSeconds (Queen's message age eviction) deletes older messages for every reader,
    -- consumed or not, leased or not, whether retentionEnabled is set or not.
    retention_seconds     int  GENERATED ALWAYS AS (CASE WHEN (options->>'retentionEnabled')::bool
                                                         THEN (options->>'retentionSeconds')::int ELSE 0 END) STORED,
    completed_retention_seconds int GENERATED ALWAYS AS ((options->>'completedRetentionSeconds')::int) STORED,
    max_wait_seconds      int  GENERATED ALWAYS AS ((options->>'maxWaitTimeSeconds')::int) STORED
);
CREATE INDEX IF NOT EXISTS rq_queues_namespace_task ON rq_queues (namespace, task);

-- A partition's id is a UUID whose first eight bytes are a number of its own and whose last
-- eight are zero: the framed pop answer carries a partition as a 64-bit integer, and the
-- broker reads that integer back into the UUID (engine/names.py) without a lookup. The numbers
-- come from a sequence, scrambled (multiplied by an odd constant modulo 2^64, a bijection), so
-- ids stay unique by construction yet spread evenly over the id space, which retention's
-- parallel workers split into equal ranges (maintenance/retention.py).
CREATE SEQUENCE IF NOT EXISTS rq_partition_numbers;
CREATE OR REPLACE FUNCTION rq_new_partition_id() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT (lpad(to_hex((CASE WHEN x >= 9223372036854775808 THEN x - 18446744073709551616 ELSE x END)::bigint),
                 16, '0') || '0000000000000000')::uuid
    FROM (SELECT (nextval('rq_partition_numbers')::numeric * 11400714819323198485) % 18446744073709551616 AS x) n
$$;

-- The partition row is also the per-partition write lock and offset allocator.
CREATE TABLE IF NOT EXISTS rq_partitions (
    id             uuid PRIMARY KEY DEFAULT rq_new_partition_id(),
    queue_id       bigint NOT NULL,
    name           text NOT NULL,
    last_offset    bigint NOT NULL DEFAULT -1,
    log_start      bigint NOT NULL DEFAULT 0,
    last_write_at  timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
) WITH (fillfactor = 70, vacuum_truncate = off, autovacuum_vacuum_scale_factor = 0.02);
-- (re)attached on every schema run: 000_functions.sql drops rq_new_partition_id, and the default with it
ALTER TABLE rq_partitions ALTER COLUMN id SET DEFAULT rq_new_partition_id();
-- Pop candidates: the most recently written partitions first (the sweep walks the unique
-- (queue_id, name) index). last_write_at moves at most once a second per partition, so most
-- pushes stay HOT updates.
CREATE INDEX IF NOT EXISTS rq_partitions_recent ON rq_partitions (queue_id, last_write_at DESC NULLS LAST);

-- Messages: one row per push group per partition. payloads[i] is the pre-rendered JSON
-- fragment of message base_offset + i - 1 (everything a pop sends that never changes).
CREATE TABLE IF NOT EXISTS rq_segments (
    partition_id  uuid NOT NULL,
    base_offset   bigint NOT NULL,
    end_offset    bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    txids         text[] NOT NULL,
    payloads      bytea[] NOT NULL,
    PRIMARY KEY (partition_id, base_offset)
) WITH (autovacuum_vacuum_scale_factor = 0.02, vacuum_truncate = off);
-- No planner statistics on the payloads: nothing filters on them, building them decompresses
-- and hashes every sampled segment's fragments, and under retention the table turns over, and
-- is analysed, every autovacuum round. The transactionIds keep theirs: the planner sizes the
-- ack's unnest of them from those statistics.
ALTER TABLE rq_segments ALTER COLUMN payloads SET STATISTICS 0;
-- Segments in creation order, for retention's due walks (rq_retention_due_step): a walk reads
-- just the segments that fell due since its last step, instead of visiting every partition
-- that holds data. One more index entry per segment (not per message) on the push.
CREATE INDEX IF NOT EXISTS rq_segments_due ON rq_segments (created_at, partition_id, base_offset);

-- How the payloads of segments written from now on are stored, and the method in effect:
-- 'pglz' and 'lz4' compress them (lz4 only where this server was built with it), 'none' keeps
-- them uncompressed out of line (less CPU a push, more disk and WAL), 'auto' is lz4 where
-- available, else pglz. Segments already written stay as they are. The column is altered only
-- when it differs, since the change takes the table's lock for a moment; every broker applies
-- its setting at start (store/schema.py), so nodes of one database must agree on it.
CREATE OR REPLACE FUNCTION rq_payload_compression(p_choice text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_lz4 bool := EXISTS (SELECT 1 FROM pg_settings
                          WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals));
    v_method text := CASE WHEN p_choice = 'auto' THEN CASE WHEN v_lz4 THEN 'lz4' ELSE 'pglz' END ELSE p_choice END;
    v_storage "char";
    v_compression "char";
BEGIN
    IF v_method IS NULL OR v_method NOT IN ('lz4', 'pglz', 'none') THEN
        RAISE EXCEPTION 'payload compression must be auto, lz4, pglz or none, not %', p_choice
            USING ERRCODE = '22023';
    END IF;
    IF v_method = 'lz4' AND NOT v_lz4 THEN
        RAISE EXCEPTION 'this PostgreSQL was built without lz4: choose auto, pglz or none'
            USING ERRCODE = '0A000';
    END IF;
    SELECT a.attstorage, a.attcompression INTO v_storage, v_compression
    FROM pg_attribute a WHERE a.attrelid = 'rq_segments'::regclass AND a.attname = 'payloads';
    IF v_method = 'none' THEN
        IF v_storage <> 'e' THEN
            ALTER TABLE rq_segments ALTER COLUMN payloads SET STORAGE EXTERNAL;
        END IF;
    ELSIF v_storage <> 'x' OR v_compression IS DISTINCT FROM left(v_method, 1)::"char" THEN
        EXECUTE format('ALTER TABLE rq_segments ALTER COLUMN payloads SET STORAGE EXTENDED, '
                       'ALTER COLUMN payloads SET COMPRESSION %s', v_method);
    END IF;
    RETURN v_method;
END;
$$;

-- The transactionId sidecar for deduplication: written only for queues with a window.
CREATE TABLE IF NOT EXISTS rq_dedup (
    partition_id    uuid NOT NULL,
    transaction_id  text NOT NULL,
    message_id      uuid NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_id, transaction_id)
) WITH (autovacuum_vacuum_scale_factor = 0.02, vacuum_truncate = off);
-- The purge (rq_dedup_purge_step) finds expired keys through this index. A btree, not BRIN:
-- the purge frees pages at the old end of the table, vacuum hands them to new keys, and a BRIN
-- range never narrows again, so once the table has turned over one window every range answers
-- 'maybe' and every purge step reads the whole table. Keys come in expiry order per queue, so
-- the btree is appended to at its right end, and the purge reads only what it deletes.
CREATE INDEX IF NOT EXISTS rq_dedup_expires ON rq_dedup (expires_at);

-- Deduplication keys that are UUIDv7s (what the JavaScript and Go clients, and the Python one
-- with uuid_extensions, mint, and what the broker mints for an item without one) are kept in
-- runs instead: one row per push, partition and bucket, the bucket being the first 40 bits of
-- the key's own timestamp (10 hex digits: 256 ms), with the keys in one array and the ids of
-- their messages in another. A row a key costs its index entries, which cost most of a key;
-- a run costs one entry for all its keys, and a push finds whether its keys were seen by
-- reading only the runs of their (partition, bucket): a retry carries the same key, so the
-- same bucket. Which keys are runs' is a property of the key alone (store/dedup_keys.py
-- decides, with the pattern rq_uuid7_bucket repeats), so every push of a key looks in the same
-- place. No uniqueness is enforced here: pushes to one partition hold its lock
-- (rq_lock_partitions), so they read and write its runs one at a time. The keys stay in the
-- row (MAIN), the ids, read only for a duplicate, are moved out of it (EXTERNAL), so a push's
-- probe never reads them.
CREATE TABLE IF NOT EXISTS rq_dedup_runs (
    partition_id  uuid NOT NULL,
    bucket        text COLLATE "C" NOT NULL,
    expires_at    timestamptz NOT NULL,
    keys          uuid[] NOT NULL,
    message_ids   uuid[] NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.02, vacuum_truncate = off);
ALTER TABLE rq_dedup_runs ALTER COLUMN keys SET STORAGE MAIN, ALTER COLUMN message_ids SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS rq_dedup_runs_bucket ON rq_dedup_runs (partition_id, bucket);
-- the purge's way in, as rq_dedup_expires
CREATE INDEX IF NOT EXISTS rq_dedup_runs_expires ON rq_dedup_runs (expires_at);

-- The bucket of a key kept in runs, NULL for a key kept in rq_dedup: the same rule as
-- store/dedup_keys.py, for the statements that meet a single key (a message deleted by hand)
-- and for the move below.
CREATE OR REPLACE FUNCTION rq_uuid7_bucket(p_txid text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_txid ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
                THEN substr(p_txid, 1, 8) || substr(p_txid, 10, 2) END
$$;

-- Live UUIDv7 keys stored a row a key move to runs, where pushes now look for them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM rq_migrations WHERE name = 'dedup-uuid7-runs') THEN
        WITH moved AS (
            DELETE FROM rq_dedup WHERE rq_uuid7_bucket(transaction_id) IS NOT NULL
            RETURNING partition_id, transaction_id, message_id, expires_at
        )
        INSERT INTO rq_dedup_runs (partition_id, bucket, expires_at, keys, message_ids)
        SELECT partition_id, rq_uuid7_bucket(transaction_id), expires_at,
               array_agg(transaction_id::uuid), array_agg(message_id)
        FROM moved WHERE expires_at > now()
        GROUP BY partition_id, rq_uuid7_bucket(transaction_id), expires_at;
        INSERT INTO rq_migrations (name) VALUES ('dedup-uuid7-runs');
    END IF;
END;
$$;

-- The whole consumption model: a cursor and at most one lease per (partition, group).
-- committed: every offset <= committed is done. A live lease covers span_start..span_end.
-- fillfactor 90, not lower: most cursor updates change an indexed lease column and cannot be
-- HOT anyway, and every idle cursor would carry the reserved room.
CREATE TABLE IF NOT EXISTS rq_consumers (
    partition_id      uuid NOT NULL,
    consumer_group    text NOT NULL,
    committed         bigint NOT NULL,
    span_start        bigint,
    span_end          bigint,
    lease_id          uuid,
    lease_expires_at  timestamptz,
    acked_count       int NOT NULL DEFAULT 0,
    stop_at           bigint,
    retry_count       int NOT NULL DEFAULT 0,
    retry_charged     bool NOT NULL DEFAULT false,
    attempts          int NOT NULL DEFAULT 0,
    last_delivered    bigint NOT NULL DEFAULT -1,
    PRIMARY KEY (partition_id, consumer_group)
) WITH (fillfactor = 90, vacuum_truncate = off, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX IF NOT EXISTS rq_consumers_lease ON rq_consumers (lease_id) WHERE lease_id IS NOT NULL;
-- Expired leases are pop candidates: found without scanning the queue's partitions.
CREATE INDEX IF NOT EXISTS rq_consumers_expiry ON rq_consumers (consumer_group, lease_expires_at)
    WHERE span_end IS NOT NULL;

-- Durable subscription of a named consumer group on a queue: where new cursors start, and
-- whether the group gets last-value delivery there (queen-mq's conflation(), fixed at the
-- group's first pop on the queue). Registered by the pop (rq_register_group, 003_pop.sql);
-- the operators' view of groups is 009_groups.sql.
CREATE TABLE IF NOT EXISTS rq_consumer_groups (
    queue_id           bigint NOT NULL,
    name               text NOT NULL,
    subscription_mode  text NOT NULL,
    subscription_from  timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    conflation         bool NOT NULL DEFAULT false,
    PRIMARY KEY (queue_id, name)
);

-- Messages a reader skipped at delivery because they outlived the queue's ttl, per
-- (queue, reader). Written only when something expires, so it costs nothing otherwise.
CREATE TABLE IF NOT EXISTS rq_expired (
    queue_id        bigint NOT NULL,
    consumer_group  text NOT NULL,
    expired         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, consumer_group)
);

-- What the hot paths moved since the last statistics refresh (012_stats.sql, which reads and
-- deletes them): a row per call and (queue, consumer group); consumer_group is NULL on a push's
-- row. Here rather than with the statistics because the hot paths' functions, defined before
-- that file, write them. No key and no index: a refresh reads them all. Logged, so a crash
-- loses no count: a note commits with the move.
CREATE TABLE IF NOT EXISTS rq_stats_notes (
    queue_id        bigint NOT NULL,
    consumer_group  text,
    pushed          bigint NOT NULL DEFAULT 0,
    partitions      bigint NOT NULL DEFAULT 0,
    popped          bigint NOT NULL DEFAULT 0,
    acked           bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    skipped         bigint NOT NULL DEFAULT 0
);
-- What one pop or ack moved on one cursor, before rq_stats_note sums them into notes. A message
-- the read position passes counts once, as acked (consumed) or skipped (a pop stepped over it:
-- expired by the ttl, or deleted). Dropped with the functions (000_functions.sql).
CREATE TYPE rq_stats_move AS (queue_id bigint, consumer_group text, popped bigint, acked bigint, failed bigint,
                              skipped bigint);
