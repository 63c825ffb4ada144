#!/usr/bin/env bash
# Queen's million-partition run (shared/seeds/000), scaled to the machine: one queue, a space of
# partitions none of which exists at the start, a window of 1,000 active partitions rotating so
# that every partition is created during the run, wildcard pops, explicit async acks, completed
# retention with parallel workers, deduplication off. Then the bytes a partition costs, and the
# same shape on 200 partitions on a fresh database (issue 6's reference, measured at once so
# that both ran on the same machine in the same hour), and the phases side by side.
#
#   benchmarks/million_partitions.sh            # 1,000,000 partitions: ~28 min + 10 min on the completed space + 11.5 min reference
#   benchmarks/million_partitions.sh --small    # 100,000 partitions, about 6 minutes
#
# RATE and PUSH_BATCH set the load (default 4,800 msg/s in pushes of 8: 600 pushes a second, one
# partition each, so a window of 1,000 partitions is covered every 1.67 s); CONSUMERS the number
# of closed-loop consumers (default 4, the bench's). JSON names the run's raw series (the
# reference's goes beside it, REFERENCE_JSON); REFERENCE=0 leaves the reference out. The reference
# runs WARMUP seconds (default 90: until completed retention is at work) plus as long as the
# completed space, and only what follows its warm-up is compared. SHARDS=N spreads the run over N
# embedded member databases (`reginamq serve --shards N`) and counts each one's partitions.
# Everything runs on 127.0.0.1 with embedded PostgreSQL in a temporary folder, removed at the end.
set -euo pipefail

SPACE=1000000
COMPLETED_SECONDS=600
if [[ "${1:-}" == "--small" ]]; then
    SPACE=100000
    COMPLETED_SECONDS=60
fi
RATE=${RATE:-4800}
PUSH_BATCH=${PUSH_BATCH:-8}
CONSUMERS=${CONSUMERS:-4}
ACTIVE=1000
PUSHES_PER_SECOND=$(python3 -c "print($RATE / $PUSH_BATCH)")
ROTATE=$(python3 -c "print(round($ACTIVE / $PUSHES_PER_SECOND, 4))")
COVER=$(python3 -c "print(int($SPACE / $ACTIVE * $ROTATE))")
DURATION=$((COVER + COMPLETED_SECONDS))
SHARDS=${SHARDS:-1}
PORT=${PORT:-6812}
WARMUP=${WARMUP:-90}
JSON=${JSON:-partitions-run.json}
REFERENCE_JSON=${REFERENCE_JSON:-${JSON%.json}-reference.json}
WORK=$(mktemp -d -t reginamq-partitions-XXXXXX)
DB="postgresql://postgres@/postgres?host=$WORK/pg"
BROKER=

echo "space=$SPACE active=$ACTIVE rotate=${ROTATE}s rate=$RATE push-batch=$PUSH_BATCH consumers=$CONSUMERS:" \
     "space covered in ${COVER}s, then ${COMPLETED_SECONDS}s on the completed space; work folder $WORK"
stop_broker() {
    if [[ -n "$BROKER" ]]; then
        kill "$BROKER" 2>/dev/null && wait "$BROKER" 2>/dev/null || true
        BROKER=
    fi
}
cleanup() {
    stop_broker
    rm -rf "$WORK"
}
trap cleanup EXIT
# start_broker DATA_DIR: a broker of two workers on its own embedded PostgreSQL, ready to serve.
start_broker() {
    REGINAMQ_LOG_LEVEL=warning reginamq serve --host 127.0.0.1 --port "$PORT" --workers 2 \
        --data-dir "$1" --retention-parallelism 4 --shards "${2:-1}" > "$1.log" 2>&1 &
    BROKER=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && return
        sleep 0.5
    done
    echo "the broker did not start: $1.log" >&2
    exit 1
}
# bench DATABASE_URL DURATION JSON ARGS...: the load shape both runs share.
bench() {
    reginamq bench --url "http://127.0.0.1:$PORT" --database-url "$1" --queue partitions \
        --rate "$RATE" --push-batch "$PUSH_BATCH" --consumers "$CONSUMERS" --pop-partitions 100 \
        --completed-retention 60 --dedup-window 0 --duration "$2" --report 10 --json "$3" "${@:4}"
}

start_broker "$WORK/pg" "$SHARDS"
bench "$DB" "$DURATION" "$JSON" --partitions "$SPACE" --active "$ACTIVE" --rotate-seconds "$ROTATE"

if [[ "$SHARDS" -gt 1 ]]; then
    python3 - "$WORK/pg" "$SHARDS" <<'EOF'
import asyncio, sys
import asyncpg
from pathlib import Path
from reginamq.store.embedded import EmbeddedPostgres, shard_data_dir, shard_settings

async def main(data_dir, shards):
    counts = []
    for shard in range(shards):
        conn = await asyncpg.connect(EmbeddedPostgres(shard_data_dir(Path(data_dir), shard),
                                                      shard_settings({}, shards)).url)
        counts.append(await conn.fetchval("SELECT count(*) FROM rq_partitions"))
        await conn.close()
    print("partitions per member:", ", ".join(f"{count:,} ({count / sum(counts):.1%})" for count in counts))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
EOF
fi

python3 - "$DB" <<'EOF'
import asyncio, sys, time
from reginamq.engine.analytics import refresh
from reginamq.store import Store
from reginamq.store.database import Database

async def main(url):
    database = Database(url, 2)
    await database.open()
    partitions = await database.fetchval("SELECT count(*) FROM rq_partitions")
    core = await database.fetchval(
        "SELECT pg_total_relation_size('rq_partitions') + pg_total_relation_size('rq_consumers')")
    print(f"{partitions:,} partitions: partition + cursor {core / partitions:.0f} bytes each (Queen 1.0: 641)")
    for full in (True, False):
        started = time.monotonic()
        await refresh(Store(database), full)
        print(f"statistics refresh, {'full pass' if full else 'incremental'}: "
              f"{(time.monotonic() - started) * 1000:.0f} ms")
    await database.close()

asyncio.run(main(sys.argv[1]))
EOF

if [[ "${REFERENCE:-1}" != 0 ]]; then
    stop_broker
    echo "reference: the same shape on 200 partitions, fresh database, ${WARMUP}s + ${COMPLETED_SECONDS}s"
    start_broker "$WORK/reference"
    bench "postgresql://postgres@/postgres?host=$WORK/reference" "$((WARMUP + COMPLETED_SECONDS))" \
        "$REFERENCE_JSON" --partitions 200
    python3 "$(dirname "$0")/million_phases.py" "$JSON" --reference "$REFERENCE_JSON" --warmup "$WARMUP"
else
    python3 "$(dirname "$0")/million_phases.py" "$JSON"
fi
