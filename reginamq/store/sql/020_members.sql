-- A deployment's databases (docs/shards.md): who this database is, which databases are
-- members with it, and the outcomes of transactions that span members. The same tables exist
-- in every member. rq_members holds identical rows everywhere, and only the catalog's
-- rq_decisions is ever written.

-- This database's own id, minted once, the first time the schema is applied here. Identity
-- is this id, never a URL: two nodes may reach one database under two names. numbers_from,
-- the same in every member, is the first partition number that tells its member (below).
CREATE TABLE IF NOT EXISTS rq_member_self (
    id            uuid PRIMARY KEY,
    singleton     bool NOT NULL DEFAULT true UNIQUE CHECK (singleton),
    numbers_from  bigint
);
INSERT INTO rq_member_self (id) VALUES (gen_random_uuid()) ON CONFLICT (singleton) DO NOTHING;

-- The members of the deployment this database belongs to: empty until the deployment is
-- formed (store/members.py). An ordinal is given once and never reused. The catalog (ordinal 0)
-- holds what is decided in one place: the decisions below, the partition directory.
CREATE TABLE IF NOT EXISTS rq_members (
    id         uuid PRIMARY KEY,
    ordinal    int NOT NULL UNIQUE CHECK (ordinal >= 0),
    joined_at  timestamptz NOT NULL DEFAULT now()
);

-- The outcome of each transaction prepared on several members (store/two_phase.py), on the
-- catalog. The primary key is the whole protocol: the coordinator's 'commit' and the
-- recovery's 'abort' race for one row, and whichever lands first is the outcome every
-- member gets.
CREATE TABLE IF NOT EXISTS rq_decisions (
    gid         uuid PRIMARY KEY,
    kind        text NOT NULL,  -- the coordinator's (store/two_phase.py), whose recovery forgets it
    outcome     text NOT NULL CHECK (outcome IN ('commit', 'abort')),
    decided_at  timestamptz NOT NULL DEFAULT now()
);

-- Records the outcome of ``p_gid`` unless one is recorded, and returns the recorded one. The
-- read is a statement of its own: an insert that met a row committed while it waited sees
-- that row only in a snapshot taken after it.
CREATE OR REPLACE FUNCTION rq_decide(p_gid uuid, p_outcome text, p_kind text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_outcome text;
BEGIN
    INSERT INTO rq_decisions (gid, kind, outcome) VALUES (p_gid, p_kind, p_outcome)
    ON CONFLICT (gid) DO NOTHING RETURNING outcome INTO v_outcome;
    IF v_outcome IS NULL THEN
        SELECT outcome INTO STRICT v_outcome FROM rq_decisions WHERE gid = p_gid;
    END IF;
    RETURN v_outcome;
END;
$$;

-- Writes the members' list into this database unless it is in one already; returns whether it
-- wrote. From here on this member numbers its partitions (rq_partition_numbers, 001) from
-- p_numbers_from + its ordinal in steps of 1,024, so a partition number at or past
-- p_numbers_from says its member: the number modulo 1,024 (store/members.py, home_of). The
-- lock wait is bounded: brokers forming overlapping lists in different orders would
-- otherwise wait on each other's rows across two databases, where no deadlock detector sees
-- them. The one that gives up looks again.
CREATE OR REPLACE FUNCTION rq_form_members(p_ids uuid[], p_numbers_from bigint) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    v_ordinal int;
BEGIN
    SET LOCAL lock_timeout = '5s';
    INSERT INTO rq_members (id, ordinal)
    SELECT m.id, (m.ord - 1)::int FROM unnest(p_ids) WITH ORDINALITY AS m(id, ord);
    SELECT m.ordinal INTO STRICT v_ordinal FROM rq_members m JOIN rq_member_self s ON s.id = m.id;
    UPDATE rq_member_self SET numbers_from = p_numbers_from;
    EXECUTE format('ALTER SEQUENCE rq_partition_numbers INCREMENT BY 1024 RESTART WITH %s',
                   p_numbers_from + v_ordinal);
    RETURN true;
EXCEPTION WHEN unique_violation OR lock_not_available THEN
    RETURN false;
END;
$$;

-- Where each partition lives, on the catalog (docs/shards.md, "Placement and the directory"):
-- the one truth about a name, read by a broker that meets a name it has not cached. A
-- partition's id tells its member (store/members.py, home_of), so the id is all a row keeps.
CREATE TABLE IF NOT EXISTS rq_directory (
    queue      text COLLATE "C" NOT NULL,
    partition  text COLLATE "C" NOT NULL,
    id         uuid NOT NULL,
    PRIMARY KEY (queue, partition)
);

-- Lists each name with its proposed id unless it is listed already, and answers every name's
-- listed id: the proposal, or the id an earlier claim listed (which the caller then uses, and
-- forgets its own). Names are claimed in key order, so claims that overlap never deadlock.
CREATE OR REPLACE FUNCTION rq_directory_claim(p_queue text[], p_partition text[], p_id uuid[])
RETURNS TABLE (queue text, partition text, id uuid)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rq_directory AS d (queue, partition, id)
    SELECT c.queue, c.partition, c.id
    FROM unnest(p_queue, p_partition, p_id) AS c(queue, partition, id)
    ORDER BY c.queue, c.partition
    ON CONFLICT ON CONSTRAINT rq_directory_pkey DO NOTHING;
    RETURN QUERY
    SELECT d.queue, d.partition, d.id
    FROM unnest(p_queue, p_partition) AS c(queue, partition)
    JOIN rq_directory d ON d.queue = c.queue AND d.partition = c.partition;
END;
$$;

-- On a member: ids for new partitions, from this member's numbers (so each tells its member),
-- minted before the directory lists them.
CREATE OR REPLACE FUNCTION rq_mint_partition_ids(p_count int) RETURNS uuid[]
LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(array_agg(rq_new_partition_id()), '{}') FROM generate_series(1, p_count)
$$;

-- On a member, inside the push that names them first (rq_push, 002_push.sql): creates the
-- partitions the directory lists here, each with its listed id (NULL: a pair without one), in
-- queues that exist. A partition that exists already is left as it is.
CREATE OR REPLACE FUNCTION rq_provision_listed(p_queue text[], p_partition text[], p_id uuid[])
RETURNS void LANGUAGE sql AS $$
    WITH created AS (
        INSERT INTO rq_partitions (id, queue_id, name)
        SELECT g.id, q.id, g.pname
        FROM unnest(p_queue, p_partition, p_id) AS g(qname, pname, id)
        JOIN rq_queues q ON q.name = g.qname
        WHERE g.id IS NOT NULL
        ORDER BY g.id
        ON CONFLICT DO NOTHING
        RETURNING queue_id
    )
    INSERT INTO rq_stats_notes (queue_id, partitions)  -- for the statistics (012_stats.sql)
    SELECT c.queue_id, count(*) FROM created c GROUP BY c.queue_id;
$$;

-- Adding a member to a formed deployment (`reginamq shards add`, store/members.py, admit).

-- On the catalog, inside a unit that writes what every member holds (a queue's creation,
-- configure or delete): how many members there are, read once their rows are locked for
-- share. An add locks them for update before it copies what every member holds into the new
-- member (rq_replicated), so a writer either commits before that copy is read, or waits until
-- the new member is listed and then sees one member more than it writes to, and refuses.
CREATE OR REPLACE FUNCTION rq_members_held() RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM rq_members FOR SHARE;
    RETURN (SELECT count(*) FROM rq_members);
END;
$$;

-- On the catalog, for an add: what every member holds (queues with their ids and options,
-- consumer-group subscriptions, stream queries), read once the members' rows are locked
-- against every writer of it (rq_members_held). Each statement of the function reads
-- everything committed before it began, the writers that held the lock included.
CREATE OR REPLACE FUNCTION rq_replicated() RETURNS TABLE (queues jsonb, groups jsonb, streams jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM rq_members FOR UPDATE;
    RETURN QUERY SELECT
        (SELECT coalesce(jsonb_agg(jsonb_build_object(
                    'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
                    'options', q.options, 'created_at', q.created_at, 'updated_at', q.updated_at)), '[]')
         FROM rq_queues q),
        (SELECT coalesce(jsonb_agg(to_jsonb(g)), '[]') FROM rq_consumer_groups g),
        (SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]') FROM rq_stream_queries s);
END;
$$;

-- On the member being added: the rows rq_replicated read on the catalog, with the catalog's ids.
CREATE OR REPLACE FUNCTION rq_take_replicated(p_queues jsonb, p_groups jsonb, p_streams jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO rq_queues (id, name, namespace, task, options, created_at, updated_at) OVERRIDING SYSTEM VALUE
    SELECT x.id, x.name, x.namespace, x.task, x.options, x.created_at, x.updated_at
    FROM jsonb_to_recordset(p_queues) AS x(id bigint, name text, namespace text, task text, options jsonb,
                                           created_at timestamptz, updated_at timestamptz);
    SELECT setval(pg_get_serial_sequence('rq_queues', 'id'), (SELECT max(id) FROM rq_queues))
    WHERE EXISTS (SELECT 1 FROM rq_queues);
    INSERT INTO rq_consumer_groups SELECT * FROM jsonb_populate_recordset(NULL::rq_consumer_groups, p_groups);
    INSERT INTO rq_stream_queries SELECT * FROM jsonb_populate_recordset(NULL::rq_stream_queries, p_streams);
$$;

-- On a member already in the deployment: lists the added member under the next ordinal.
CREATE OR REPLACE FUNCTION rq_admit_member(p_id uuid, p_ordinal int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO rq_members (id, ordinal) VALUES (p_id, p_ordinal);
$$;
