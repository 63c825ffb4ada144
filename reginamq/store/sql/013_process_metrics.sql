-- What each broker process did and what it cost, a row a minute per process: the data of
-- Queen's /api/v1/analytics/system-metrics and /api/v1/analytics/worker-metrics.
-- Each process writes only its own rows (maintenance/process_metrics.py), rewriting the current
-- minute's row every few seconds with the minute's totals so far, so no process ever waits for
-- another and a process that dies loses at most those few seconds. The elected stats loop
-- deletes rows older than a week (rq_process_metrics_purge_step).
CREATE TABLE IF NOT EXISTS rq_process_metrics (
    bucket timestamptz NOT NULL,          -- the minute
    hostname text NOT NULL,
    port integer NOT NULL,
    pid integer NOT NULL,
    sample_count integer NOT NULL,        -- one-second samples behind the gauges
    system jsonb NOT NULL,                -- Queen's system_metrics "metrics" object
    push_messages bigint NOT NULL,
    pop_messages bigint NOT NULL,
    ack_messages bigint NOT NULL,
    push_requests bigint NOT NULL,
    pop_requests bigint NOT NULL,
    ack_requests bigint NOT NULL,
    requests bigint NOT NULL,             -- every request answered
    ack_failed bigint NOT NULL,           -- ack items answered success:false
    dead_lettered bigint NOT NULL,        -- ack items that moved a message to the DLQ
    db_errors bigint NOT NULL,            -- requests that met an unavailable database
    loop_lag_avg_ms real NOT NULL,        -- how late the event loop ran a one-second timer
    loop_lag_max_ms real NOT NULL,
    idle_connections_avg real NOT NULL,
    idle_connections_min integer NOT NULL,
    connections_max integer NOT NULL,
    in_flight_avg real NOT NULL,          -- requests being handled at a sample
    in_flight_max integer NOT NULL,
    parked_max integer NOT NULL,          -- long polls waiting for messages
    lag_count bigint NOT NULL,            -- pops that delivered
    lag_sum_ms double precision NOT NULL, -- their oldest message's age, summed
    lag_max_ms double precision NOT NULL,
    queues jsonb NOT NULL,                -- {queue: [pops, lag_sum_ms, lag_max_ms]}
    PRIMARY KEY (bucket, hostname, port, pid)
);

CREATE OR REPLACE FUNCTION rq_process_metrics_purge_step(p_limit int, p_before timestamptz) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_process_metrics WHERE ctid IN (
            SELECT ctid FROM rq_process_metrics WHERE bucket < p_before LIMIT p_limit)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

CREATE OR REPLACE FUNCTION rq_iso(p_moment timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(p_moment AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The rows of the minutes from p_from's to p_to, of one host and one process when named: the one
-- filter every part of both answers reads through.
CREATE OR REPLACE FUNCTION rq_process_metrics_in(p_from timestamptz, p_to timestamptz, p_hostname text, p_pid int)
RETURNS SETOF rq_process_metrics LANGUAGE sql STABLE AS $$
    SELECT * FROM rq_process_metrics
    WHERE bucket >= date_trunc('minute', p_from) AND bucket <= p_to
      AND (p_hostname IS NULL OR hostname = p_hostname) AND (p_pid IS NULL OR pid = p_pid)
$$;

-- Queen's system-metrics answer: one time series per replica (hostname:port, and here each
-- worker process is a replica of its own), one point per minute, oldest first.
CREATE OR REPLACE FUNCTION rq_system_metrics(p_from timestamptz, p_to timestamptz, p_hostname text, p_pid int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH points AS (
        SELECT hostname, port, pid,
               jsonb_agg(jsonb_build_object('timestamp', rq_iso(bucket), 'sampleCount', sample_count,
                                            'metrics', system) ORDER BY bucket) AS series
        FROM rq_process_metrics_in(p_from, p_to, p_hostname, p_pid)
        GROUP BY hostname, port, pid
    )
    SELECT jsonb_build_object(
        'timeRange', jsonb_build_object('from', rq_iso(p_from), 'to', rq_iso(p_to)),
        'replicas', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                         'hostname', hostname, 'port', port, 'workerId', pid::text, 'timeSeries', series)
                         ORDER BY hostname, port, pid) FROM points), '[]'::jsonb),
        'replicaCount', (SELECT count(*) FROM points))
$$;

-- Queen's worker-metrics answer: throughput and health of every process summed into buckets
-- whose width grows with the range (1 minute up to an hour, then 5, 15, 60, 360), newest
-- first; each process's last five minutes; pop lag per queue; totals of the rows kept.
CREATE OR REPLACE FUNCTION rq_worker_metrics(p_from timestamptz, p_to timestamptz, p_hostname text, p_pid int)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_minutes int := CASE
        WHEN p_to - p_from <= interval '1 hour' THEN 1
        WHEN p_to - p_from <= interval '6 hours' THEN 5
        WHEN p_to - p_from <= interval '1 day' THEN 15
        WHEN p_to - p_from <= interval '7 days' THEN 60
        ELSE 360 END;
    v_series jsonb;
    v_points int;
    v_workers jsonb;
    v_queues jsonb;
    v_summary jsonb;
BEGIN
    WITH chosen AS (
        SELECT * FROM rq_process_metrics_in(p_from, p_to, p_hostname, p_pid)
    ), buckets AS (
        SELECT date_bin(make_interval(mins => v_minutes), bucket, timestamptz '2000-01-01') AS at,
               sum(push_messages) AS push_msg, sum(pop_messages) AS pop_msg, sum(ack_messages) AS ack_msg,
               sum(push_requests) AS push_req, sum(pop_requests) AS pop_req, sum(ack_requests) AS ack_req,
               sum(requests) AS done, round(avg(loop_lag_avg_ms)) AS avg_el, round(max(loop_lag_max_ms)) AS max_el,
               round(avg(idle_connections_avg)) AS avg_idle, min(idle_connections_min) AS min_idle,
               max(connections_max) AS conns, round(avg(in_flight_avg)) AS avg_flight,
               max(in_flight_max) AS max_flight, max(parked_max) AS parked,
               CASE WHEN sum(lag_count) > 0 THEN round((sum(lag_sum_ms) / sum(lag_count))::numeric) ELSE 0 END
                   AS avg_lag,
               round(max(lag_max_ms)::numeric) AS max_lag, sum(lag_count) AS lags,
               sum(db_errors) AS db_errs, sum(ack_messages) - sum(ack_failed) AS ack_ok,
               sum(ack_failed) AS ack_fail, sum(dead_lettered) AS dlq
        FROM chosen GROUP BY 1
    )
    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'timestamp', rq_iso(at),
               'pushMessages', push_msg, 'popMessages', pop_msg, 'ackMessages', ack_msg,
               'pushRequests', push_req, 'popRequests', pop_req, 'ackRequests', ack_req, 'jobsDone', done,
               'pushPerSecond', round(push_msg / (v_minutes * 60.0), 2),
               'popPerSecond', round(pop_msg / (v_minutes * 60.0), 2),
               'ackPerSecond', round(ack_msg / (v_minutes * 60.0), 2),
               'avgEventLoopLagMs', avg_el, 'maxEventLoopLagMs', max_el,
               'avgFreeSlots', avg_idle, 'minFreeSlots', min_idle, 'dbConnections', conns,
               'avgJobQueueSize', avg_flight, 'maxJobQueueSize', max_flight, 'backoffSize', parked,
               'avgLagMs', avg_lag, 'maxLagMs', max_lag, 'lagCount', lags,
               'dbErrors', db_errs, 'ackSuccess', ack_ok, 'ackFailed', ack_fail, 'dlqCount', dlq)
               ORDER BY at DESC), '[]'::jsonb), count(*)
    INTO v_series, v_points FROM buckets;

    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'hostname', hostname, 'workerId', pid,
               'avgEventLoopLagMs', avg_el, 'maxEventLoopLagMs', max_el, 'freeSlots', min_idle,
               'dbConnections', conns, 'jobQueueSize', max_flight, 'backoffSize', parked,
               'messagesProcessed', processed, 'lastSeen', rq_iso(last_seen))
               ORDER BY hostname, pid), '[]'::jsonb)
    INTO v_workers
    FROM (SELECT hostname, pid, round(avg(loop_lag_avg_ms)) AS avg_el, round(max(loop_lag_max_ms)) AS max_el,
                 min(idle_connections_min) AS min_idle, max(connections_max) AS conns,
                 max(in_flight_max) AS max_flight, max(parked_max) AS parked,
                 sum(push_messages + ack_messages) AS processed, max(bucket) AS last_seen
          FROM rq_process_metrics_in(now() - interval '5 minutes', 'infinity', p_hostname, p_pid)
          GROUP BY hostname, pid) w;

    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'queueName', queue, 'popCount', pops,
               'avgLagMs', CASE WHEN pops > 0 THEN round((lag_sum / pops)::numeric) ELSE 0 END,
               'maxLagMs', round(lag_max::numeric))
               ORDER BY pops DESC, queue), '[]'::jsonb)
    INTO v_queues
    FROM (SELECT q.key AS queue, sum((q.value->>0)::bigint) AS pops, sum((q.value->>1)::float8) AS lag_sum,
                 max((q.value->>2)::float8) AS lag_max
          FROM rq_process_metrics_in(p_from, p_to, p_hostname, p_pid) m, jsonb_each(m.queues) q
          GROUP BY q.key) lagged;

    SELECT jsonb_build_object(
               'totalPushMessages', COALESCE(sum(push_messages), 0),
               'totalPopMessages', COALESCE(sum(pop_messages), 0),
               'totalAckMessages', COALESCE(sum(ack_messages), 0),
               'totalPushRequests', COALESCE(sum(push_requests), 0),
               'totalPopRequests', COALESCE(sum(pop_requests), 0),
               'totalAckRequests', COALESCE(sum(ack_requests), 0),
               'totalDbErrors', COALESCE(sum(db_errors), 0),
               'totalAckFailed', COALESCE(sum(ack_failed), 0),
               'totalDlq', COALESCE(sum(dead_lettered), 0),
               -- Queen's pushed-minus-popped; pops count once per consumer group, so never below 0
               'pendingMessages', greatest(COALESCE(sum(push_messages) - sum(pop_messages), 0), 0))
    INTO v_summary FROM rq_process_metrics;

    RETURN jsonb_build_object(
        'timeRange', jsonb_build_object('from', rq_iso(p_from), 'to', rq_iso(p_to)),
        'bucketMinutes', v_minutes, 'pointCount', v_points, 'timeSeries', v_series,
        'workers', v_workers, 'queues', v_queues, 'summary', v_summary);
END;
$$;

-- What every process counted from the minute of p_since on, for the bench's report of how pops
-- and acks were answered: push requests, pop attempts that asked the database and those that
-- found nothing, push announcements heard and the pops they woke (maintenance/process_metrics.py,
-- "pops"), ack requests and the rq_ack calls that applied them ("acks").
CREATE OR REPLACE FUNCTION rq_traffic_counts(p_since timestamptz)
RETURNS TABLE (pushes bigint, pop_queries bigint, empty_queries bigint, push_notices bigint,
               woken_by_push bigint, ack_requests bigint, ack_calls bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(push_requests), 0)::bigint,
           coalesce(sum((system->'pops'->>'queries')::bigint), 0)::bigint,
           coalesce(sum((system->'pops'->>'empty_queries')::bigint), 0)::bigint,
           coalesce(sum((system->'pops'->>'push_notices')::bigint), 0)::bigint,
           coalesce(sum((system->'pops'->>'woken_by_push')::bigint), 0)::bigint,
           coalesce(sum(ack_requests), 0)::bigint,
           coalesce(sum((system->'acks'->>'calls')::bigint), 0)::bigint
    FROM rq_process_metrics WHERE bucket >= date_trunc('minute', p_since)
$$;
