"""The memory a broker process spends keeping a partition name's member (store/homes.py).

    python benchmarks/kept_names_memory.py [--names 200000] [--queues 1]

Keeps ``--names`` names spread over ``--queues`` queues, listed as the directory answers them
(a fresh name string and an asyncpg UUID each, a thousand a look-up), in a process's name cache,
and prints the bytes a kept name costs once the look-ups' own objects are gone (tracemalloc):
what a broker of several member databases holds, in each worker, for every partition it has met.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
import uuid

from asyncpg.pgproto.pgproto import UUID

from reginamq.store.database import Database
from reginamq.store.homes import Homes
from reginamq.store.members import MAX_MEMBERS, Deployment, Member

LOOKUP = 1_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=200_000)
    parser.add_argument("--queues", type=int, default=1)
    args = parser.parse_args()
    databases = [Database(f"postgresql://127.0.0.1:1/member{ordinal}", 1) for ordinal in range(3)]
    homes = Homes(databases)
    homes.join(Deployment([Member(uuid.UUID(int=ordinal + 1), ordinal, database)
                           for ordinal, database in enumerate(databases)], MAX_MEMBERS))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, args.names, LOOKUP):
        homes._keep({(f"queue-{number % args.queues}", f"customer-{number:08d}"): UUID(str(uuid.uuid4()))
                     for number in range(start, min(start + LOOKUP, args.names))})
    gc.collect()
    spent = tracemalloc.get_traced_memory()[0] - before
    print(f"{args.names:,} names over {args.queues} queue(s): {spent / args.names:.0f} bytes a kept name")


if __name__ == "__main__":
    main()
