"""What an embedded broker starts and stops, in order: what ``reginamq serve`` and one worker
process (reginamq/process.py) do between them, inside the application's event loop.

Start: the embedded PostgreSQL when no database URL is given (claimed, so a ``reginamq serve``
or another application on the same data folder shares it), the schema, the deployment check,
the spool folder (the one every broker process on this host shares for this database), the
engine's broker (pools, the LISTEN of wake-ups, the spool replay, the lease watcher) and the
maintenance loops, elected with every other process on the database exactly as between
brokers. A failure raises :class:`~reginamq.library.errors.StartError` with the one line
``reginamq serve`` would print, after undoing whatever had started; nothing exits the process.

Stop, in reverse: the loops (an elected loop hands its lease back), the engine, then the
embedded server, which the last of its users stops.
"""

from __future__ import annotations

import asyncio
import dataclasses

from reginamq.common.errors import Unavailable
from reginamq.config import SettingError, Settings
from reginamq.engine.broker import Broker as Engine
from reginamq.engine.spool import SpoolUnusable
from reginamq.engine.spool import prepare_folder as prepare_spool
from reginamq.library.errors import StartError
from reginamq.maintenance.loops import Maintenance
from reginamq.store.embedded import EmbeddedPostgres, EmbeddedPostgresError
from reginamq.store.members import check_deployment
from reginamq.store.schema import DatabaseUnusable, apply_schema, check_schema

# What a start may meet that is not a bug: each says on one line what to fix.
_START_FAILURES = (EmbeddedPostgresError, DatabaseUnusable, SpoolUnusable, Unavailable, SettingError, OSError)


class Runtime:
    """The started parts of one embedded broker; :meth:`stop` undoes exactly what started."""

    def __init__(self, settings: Settings, *, elected: bool, process_metrics: bool, schema: bool) -> None:
        # A library process serves no port: its process row (maintenance/process_metrics.py) says 0.
        self.settings = dataclasses.replace(settings, port=0)
        self._elected = elected
        self._metrics = process_metrics
        self._schema = schema
        self.embedded: EmbeddedPostgres | None = None
        self.engine: Engine | None = None
        self._maintenance: Maintenance | None = None

    async def start(self) -> Engine:
        try:
            return await self._start()
        except _START_FAILURES as error:
            await self.stop()
            raise StartError(str(error)) from error
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> Engine:
        settings = self.settings
        if not settings.database_urls:
            self.embedded = EmbeddedPostgres(settings.data_dir)
            url = await asyncio.to_thread(self.embedded.claim)
            settings = dataclasses.replace(settings, database_url=url)
        urls = settings.database_urls
        for url in urls:
            if self._schema:
                await apply_schema(url, settings.payload_compression)
            else:
                await check_schema(url)
        urls = await check_deployment(urls)
        settings = self.settings = dataclasses.replace(settings, database_url=" ".join(urls))
        prepare_spool(settings.resolved_spool_dir())
        self.engine = Engine(settings)
        await self.engine.start()
        self._maintenance = Maintenance(self.engine, elected=self._elected, metrics=self._metrics)
        await self._maintenance.start()
        return self.engine

    async def stop(self) -> None:
        maintenance, self._maintenance = self._maintenance, None
        engine, self.engine = self.engine, None
        embedded, self.embedded = self.embedded, None
        try:
            if maintenance is not None:
                await maintenance.stop()
        finally:
            try:
                if engine is not None:
                    await engine.stop()
            finally:
                if embedded is not None:
                    await asyncio.to_thread(embedded.release)
