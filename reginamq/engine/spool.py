"""The disk spool: pushes accepted while PostgreSQL cannot be reached.

A push that cannot reach the database is appended here and fsynced before its producer is
answered ``buffered``; a drain task replays the records in order, with their original
message ids and transactionIds, once the database answers again (deduplication on the
transactionId makes a replayed record idempotent). While records wait, new pushes of this
process are spooled behind them, so a partition's order is kept across the outage.

Each process owns one file (locked with flock while it lives); on start a process also
drains files whose owner died, so a crash does not strand buffered messages. Records are
framed as length + CRC32 + msgpack; a record torn by a crash was never acknowledged and is
ignored. Drained progress is kept in a small sidecar, so a restart does not replay what was
already written.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import struct
import zlib
from pathlib import Path

import msgspec

from reginamq.engine import push
from reginamq.engine.errors import Unavailable

log = logging.getLogger("reginamq.spool")
HEADER = struct.Struct(">II")  # length, crc32
RETRY_SECONDS = 1.0


class SpoolFile:
    """One append-only file of push records plus the offset drained so far."""

    def __init__(self, path: Path):
        self.path = path
        self.progress_path = path.with_suffix(".drained")
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    def lock(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def close(self) -> None:
        os.close(self._fd)

    def append(self, prepared: push.PreparedPush) -> None:
        body = msgspec.msgpack.encode(prepared)
        os.write(self._fd, HEADER.pack(len(body), zlib.crc32(body)) + body)
        os.fsync(self._fd)

    def drained(self) -> int:
        try:
            return int(self.progress_path.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def mark_drained(self, offset: int) -> None:
        temporary = self.progress_path.with_suffix(".tmp")
        temporary.write_text(str(offset))
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        temporary.replace(self.progress_path)

    def records(self):
        """(end offset, record) for every whole record after the drained point."""
        with open(self.path, "rb") as handle:
            handle.seek(self.drained())
            while True:
                header = handle.read(HEADER.size)
                if len(header) < HEADER.size:
                    return
                length, crc = HEADER.unpack(header)
                body = handle.read(length)
                if len(body) < length or zlib.crc32(body) != crc:
                    return  # torn by a crash before it was acknowledged
                yield handle.tell(), msgspec.msgpack.decode(body, type=push.PreparedPush)

    def pending(self) -> bool:
        return os.fstat(self._fd).st_size > self.drained()

    def reset(self) -> None:
        """Everything was replayed: start the file afresh."""
        os.ftruncate(self._fd, 0)
        self.mark_drained(0)


class Spool:
    def __init__(self, folder: Path, run):
        self.folder = folder
        self._run = run
        self._own: SpoolFile | None = None
        self._orphans: list[SpoolFile] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._maybe_pending = True
        self._closed = False
        self.buffered = 0

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._own = SpoolFile(self.folder / f"spool-{os.getpid()}.log")
        self._own.lock()
        for path in sorted(self.folder.glob("spool-*.log")):
            if path == self._own.path:
                continue
            orphan = SpoolFile(path)
            if orphan.lock():  # its owner is gone: this process drains it
                self._orphans.append(orphan)
            else:
                orphan.close()
        self._task = asyncio.get_running_loop().create_task(self._drain_forever())
        if self.pending():
            self._wake.set()

    async def stop(self, drain_seconds: float = 10.0) -> None:
        """Stop draining; first try, for a bounded time, to leave nothing behind on disk
        (what is left is drained by the next process that starts on this folder)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._own is not None and self.pending():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drain_once(), drain_seconds)
        self._closed = True
        for spool_file in [*self._orphans, *([self._own] if self._own else [])]:
            spool_file.close()

    def pending(self) -> bool:
        """Cheap on the push path: only the files' sizes are looked at, and only while the
        spool has been used since it was last found empty."""
        if not self._maybe_pending:
            return False
        self._maybe_pending = any(f.pending() for f in [*self._orphans, *([self._own] if self._own else [])])
        return self._maybe_pending

    def append(self, prepared: push.PreparedPush) -> list[dict]:
        """Keep a push on disk (fsynced) and build its ``buffered`` answer."""
        if self._own is None or self._closed:
            raise Unavailable("database unavailable and the spool is closed (shutting down)")
        self._own.append(prepared)
        self._maybe_pending = True
        self.buffered += len(prepared.queues)
        self._wake.set()
        return [{**item, "status": "buffered"} for item in push.answer(prepared, {})]

    async def _drain_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while not await self._drain_once():
                await asyncio.sleep(RETRY_SECONDS)

    async def _drain_once(self) -> bool:
        for spool_file in [*self._orphans, self._own]:
            if not await self._drain(spool_file):
                return False
        return True

    async def _drain(self, spool_file: SpoolFile) -> bool:
        """Replay one file; False when the database is still away (try again later)."""
        try:
            for end, prepared in spool_file.records():
                await self._run(lambda conn, prepared=prepared: push.execute(conn, prepared))
                self.buffered = max(0, self.buffered - len(prepared.queues))
                spool_file.mark_drained(end)
        except Unavailable:
            return False
        except Exception:
            log.exception("replaying %s failed; will retry", spool_file.path.name)
            return False
        if not spool_file.pending():
            spool_file.reset()
            log.info("spool %s drained", spool_file.path.name)
        return True
