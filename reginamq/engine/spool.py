"""The disk spool: pushes accepted while PostgreSQL cannot be reached.

A push that cannot reach the database is appended here and fsynced before its producer is
answered ``buffered``; records are replayed in append order, with their original message ids
and transactionIds, once the database answers again (deduplication on the transactionId makes
a replayed record idempotent).

Order is the point of the design. All worker processes of a node (and any broker sharing the
folder) append to ONE file, under an exclusive flock, so the file's order is the order in
which the node accepted the pushes; one process at a time replays it (a second flock); and
while the file holds anything, every process spools its new pushes behind it instead of
writing them directly, so a producer's later push can never overtake an earlier buffered one.
The check is one ``stat`` per push; the file is truncated once fully replayed.

Records are framed as length + CRC32 + msgpack; a record torn by a crash was never
acknowledged and is ignored. The replayed offset is kept in a sidecar (fsynced per record),
so a crash during replay does not replay much again.
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

from reginamq.common.errors import Unavailable
from reginamq.engine import push
from reginamq.engine.encryption import Sealer
from reginamq.store import Store

log = logging.getLogger("reginamq.spool")
HEADER = struct.Struct(">II")  # length, crc32
RETRY_SECONDS = 0.5
WATCH_SECONDS = 1.0


class SpoolUnusable(Exception):
    """The spool folder cannot hold the spool; the message names it and says why."""


def prepare_folder(folder: Path) -> None:
    """Create the folder and its files as :meth:`Spool.start` opens them: a folder this user
    cannot write is refused once, at start, rather than by every worker process."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, flags in (("spool.log", os.O_APPEND), ("drain.lock", 0)):
            os.close(os.open(folder / name, os.O_RDWR | os.O_CREAT | flags, 0o600))
    except OSError as error:
        reason = (f"{error.filename} is a file, not a folder" if isinstance(error, FileExistsError) else
                  "a folder on its path is a file" if isinstance(error, NotADirectoryError) else
                  error.strerror or str(error))
        raise SpoolUnusable(f"cannot use the spool folder {folder}: {reason}; "
                            "choose another with --spool-dir") from None


@contextlib.contextmanager
def _locked(fd: int, blocking: bool = True):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        yield False
        return
    try:
        yield True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


class Spool:
    def __init__(self, folder: Path, store: Store, sealer: Sealer):
        self.folder = folder
        self._store = store
        self._sealer = sealer
        self._log_fd: int | None = None
        self._drain_fd: int | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.buffered = 0

    @property
    def path(self) -> Path:
        return self.folder / "spool.log"

    @property
    def progress_path(self) -> Path:
        return self.folder / "spool.replayed"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log_fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self._drain_fd = os.open(self.folder / "drain.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._task = asyncio.get_running_loop().create_task(self._drain_forever())

    async def stop(self, drain_seconds: float = 10.0) -> None:
        """Stop; first try, for a bounded time, to leave nothing behind on disk (what is left
        is replayed by the next process that starts on this folder)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._log_fd is not None and self.pending():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._replay(), drain_seconds)
        for fd in (self._log_fd, self._drain_fd):
            if fd is not None:
                os.close(fd)
        self._log_fd = self._drain_fd = None

    def waiting_bytes(self) -> int:
        """Bytes of the node's spool not replayed yet (a gauge: 0 in normal operation)."""
        if self._log_fd is None:
            return 0
        return max(0, os.fstat(self._log_fd).st_size - self._replayed())

    def pending(self) -> bool:
        """Whether anything waits in the node's spool (written by any process)."""
        return self._log_fd is not None and os.fstat(self._log_fd).st_size > 0

    def append(self, prepared: push.PreparedPush) -> list[dict]:
        """Keep a push on disk (fsynced) and build its ``buffered`` answer. Fragments of the
        queues last seen encrypted go to disk sealed; the replay seals any others that need it."""
        if self._log_fd is None:
            raise Unavailable("database unavailable and the spool is closed (shutting down)")
        push.seal(prepared, self._sealer, self._sealer.known_encrypted())
        body = msgspec.msgpack.encode(prepared)
        with _locked(self._log_fd):
            os.write(self._log_fd, HEADER.pack(len(body), zlib.crc32(body)) + body)
            os.fsync(self._log_fd)
        self.buffered += len(prepared.queues)
        self._wake.set()
        return [{**item, "status": "buffered"} for item in push.answer(prepared, {})]

    async def _drain_forever(self) -> None:
        """Replay whenever there is something; also watch for records other processes wrote."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), WATCH_SECONDS)
            self._wake.clear()
            while self.pending() and not await self._replay():
                await asyncio.sleep(RETRY_SECONDS)

    async def _replay(self) -> bool:
        """Replay the file as far as it goes; False when the database is still away.

        Only the process holding the drain lock replays; the others report success and go on
        spooling behind it until the file is empty.
        """
        with _locked(self._drain_fd, blocking=False) as mine:
            if not mine:
                return True
            try:
                for end, prepared in self._records(self._replayed()):
                    await push.execute(self._store, prepared, self._sealer, enforce_max_size=False)
                    self.buffered = max(0, self.buffered - len(prepared.queues))
                    self._mark_replayed(end)
            except Unavailable:
                return False
            except Exception:
                log.exception("replaying the spool failed; will retry")
                return False
            with _locked(self._log_fd):
                # Nobody appends while we hold this lock: no whole record left means the file
                # is done (a torn tail is a record whose writer died before acknowledging it).
                if next(self._records(self._replayed()), None) is None:
                    os.ftruncate(self._log_fd, 0)
                    self._mark_replayed(0)
                    log.info("spool replayed")
            return True

    def _records(self, start: int):
        """(end offset, record) for every whole record from ``start``."""
        with open(self.path, "rb") as handle:
            handle.seek(start)
            while True:
                header = handle.read(HEADER.size)
                if len(header) < HEADER.size:
                    return
                length, crc = HEADER.unpack(header)
                body = handle.read(length)
                if len(body) < length or zlib.crc32(body) != crc:
                    return  # torn by a crash before it was acknowledged
                yield handle.tell(), msgspec.msgpack.decode(body, type=push.PreparedPush)

    def _replayed(self) -> int:
        try:
            return int(self.progress_path.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _mark_replayed(self, offset: int) -> None:
        temporary = self.progress_path.with_suffix(".tmp")
        temporary.write_text(str(offset))
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        temporary.replace(self.progress_path)
