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

-- On a member: creates the partitions the directory lists here, each with its listed id, in
-- queues that exist. A partition that exists already is left as it is.
CREATE OR REPLACE FUNCTION rq_provision_listed(p_queue text[], p_partition text[], p_id uuid[])
RETURNS void LANGUAGE sql AS $$
    WITH created AS (
        INSERT INTO rq_partitions (id, queue_id, name)
        SELECT g.id, q.id, g.pname
        FROM unnest(p_queue, p_partition, p_id) AS g(qname, pname, id)
        JOIN rq_queues q ON q.name = g.qname
        ORDER BY g.id
        ON CONFLICT DO NOTHING
        RETURNING queue_id
    )
    INSERT INTO rq_stats_notes (queue_id, partitions)  -- for the statistics (012_stats.sql)
    SELECT c.queue_id, count(*) FROM created c GROUP BY c.queue_id;
$$;
