"""Where reginamq's data lives: one typed API over PostgreSQL.

The engine asks the :class:`Store` for what it needs (push these groups, claim for this pop,
ack these spans, page these dead letters, ...) and never sees a connection, a pool, SQL or an
asyncpg exception. The store owns the pool (:mod:`.database`), the schema (:mod:`.schema`,
the ``sql/`` folder), the embedded server (:mod:`.embedded`) and the mapping of database
failures: every call either returns, or raises :class:`~reginamq.common.errors.Unavailable`
(a 503 the client may retry: the database is away, overloaded or kept aborting the call) or
:class:`~reginamq.common.errors.BadRequest` (PostgreSQL refused a value). Deadlocks and
serialization failures are retried inside the store.

A store has one attribute per table family; each method is one call and states what it
guarantees. Every method is atomic on its own. :meth:`Store.atomically` runs several calls in
one transaction: all of them commit or none.

The families:

- ``dead_letters``: the dead-letter queue's pages, replay and purge (:mod:`.dead_letters`);
- ``queues``: the queue row a configure reads and writes, deletion, the change notice (:mod:`.queues`);
- ``resources``: what is in the queues, paged: overview, queues, partitions, depth (:mod:`.resources`);
- ``consumer_groups``: where each group stands, seek, delete, subscription (:mod:`.consumer_groups`);
- ``message_admin``: single messages for operators: page, read, delete, retry (:mod:`.message_admin`);
- ``statistics``: the refresh and the counters and gauges it leaves (:mod:`.statistics`);
- ``process_metrics``: each process's row a minute and Queen's process analytics (:mod:`.process_metrics`);
- ``housekeeping``: the stats loop's bounded purge steps and new tables' ANALYZE (:mod:`.housekeeping`);
- ``traces``: events recorded against a message, found by message or by name (:mod:`.traces`);
- ``reads``: reads by offset and partition discovery, no lease and no cursor (:mod:`.reads`);
- ``streams``: streaming queries' registration and state rows per partition (:mod:`.streams`);
- ``locks``: locks and semaphores as key/value permits with a lifetime (:mod:`.locks`);
- ``kv``: the key/value store's ops, applied by one function (:mod:`.kv`);
- ``timers``: timers' schedule, peek and page, and the fire's take and back-off (:mod:`.timers`);
- ``ephemeral``: ephemeral queues on UNLOGGED tables, and their declarations (:mod:`.ephemeral`);
- ``retention``: retention's bounded steps and the purges behind them (:mod:`.retention`);
- ``leadership``: the leases that elect the one process running a loop (:mod:`.leadership`);
- ``messages``: push, pop, ack, lease renewal, and the look-ups of transactions and of the lease
  watcher (:mod:`.messages`);
- ``notices``: the notifications between processes, sent and heard (:mod:`.notices`);
- ``queue_settings``: the queue options each process keeps a copy of (:mod:`.queue_settings`);
- ``membership``: this database's id and its deployment's member databases (:mod:`.membership`);
- ``directory``: on the catalog, the id (and so the member) of each partition name (:mod:`.directory`);
- ``provisioning``: on a member, queues and partitions made ahead of a push, with the ids the
  directory listed (:mod:`.provisioning`);
- ``moves``: on a member, idle partitions taken out and written in by a rebalance (:mod:`.moves`).

Transactions over several member databases are :class:`.two_phase.TwoPhase`'s, forming
and checking a deployment is :func:`.members.join_up`'s, where a partition lives is
:class:`.homes.Homes`'s, and :class:`.sharded_messages.ShardedMessages` is the ``messages``
family over several members (docs/shards.md).

A second backend is another implementation of these families behind the same names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from reginamq.store.consumer_groups import ConsumerGroups
from reginamq.store.database import Database, Executor, Session
from reginamq.store.dead_letters import DeadLetters
from reginamq.store.directory import Directory
from reginamq.store.ephemeral import Ephemeral
from reginamq.store.housekeeping import Housekeeping
from reginamq.store.kv import KeyValues
from reginamq.store.leadership import Leadership
from reginamq.store.locks import Locks
from reginamq.store.membership import Membership
from reginamq.store.message_admin import MessageAdmin
from reginamq.store.messages import Messages
from reginamq.store.moves import Moves
from reginamq.store.notices import Notices
from reginamq.store.process_metrics import ProcessMetrics
from reginamq.store.provisioning import Provisioning
from reginamq.store.queue_settings import QueueSettings
from reginamq.store.queues import Queues
from reginamq.store.reads import Reads
from reginamq.store.resources import Resources
from reginamq.store.retention import Retention
from reginamq.store.statistics import Statistics
from reginamq.store.streams import Streams
from reginamq.store.timers import Timers
from reginamq.store.traces import Traces

T = TypeVar("T")


class Store:
    """The families of one executor: the pool (each call on its own) or one transaction."""

    def __init__(self, executor: Executor):
        self._executor = executor
        self.dead_letters = DeadLetters(executor)
        self.queues = Queues(executor)
        self.resources = Resources(executor)
        self.consumer_groups = ConsumerGroups(executor)
        self.message_admin = MessageAdmin(executor)
        self.statistics = Statistics(executor)
        self.process_metrics = ProcessMetrics(executor)
        self.housekeeping = Housekeeping(executor)
        self.traces = Traces(executor)
        self.reads = Reads(executor)
        self.streams = Streams(executor)
        self.locks = Locks(executor)
        self.kv = KeyValues(executor)
        self.timers = Timers(executor)
        self.ephemeral = Ephemeral(executor)
        self.retention = Retention(executor)
        self.leadership = Leadership(executor)
        self.messages = Messages(executor)
        self.notices = Notices(executor)
        self.queue_settings = QueueSettings(executor)
        self.membership = Membership(executor)
        self.directory = Directory(executor)
        self.provisioning = Provisioning(executor)
        self.moves = Moves(executor)

    def member_stores(self) -> list[Store]:
        """The store of each member database, in ordinal order: this one alone (a deployment of
        several is :class:`.sharded.ShardedStore`'s)."""
        return [self]

    async def atomically(self, work: Callable[[Store], Awaitable[T]]) -> T:
        """``work`` with a store whose every call runs in one transaction, committed when
        ``work`` returns and rolled back when it raises; retried as a whole on a deadlock."""
        if isinstance(self._executor, Session):
            return await work(self)
        database: Database = self._executor  # type: ignore[assignment]
        return await database.atomically(lambda session: work(Store(session)))
