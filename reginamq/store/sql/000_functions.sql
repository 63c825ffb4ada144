-- Functions and their helper types are code, not data: whenever the schema files change,
-- every rq_* function is dropped here and the files below define them afresh, so a new
-- version may change a signature or a return type. Tables are never dropped.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS signature
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.proname LIKE 'rq\_%'
    LOOP
        EXECUTE 'DROP FUNCTION ' || f.signature || ' CASCADE';
    END LOOP;
END $$;

DROP TYPE IF EXISTS rq_ack_outcome, rq_ack_resolved, rq_stats_move CASCADE;
