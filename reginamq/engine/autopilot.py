"""Pop autopilot: the broker sizes a pop whose client left ``batch`` and/or ``partitions`` to it.

The official client (queen-mq) sends ``autopilot=true`` whenever a consumer leaves either knob
unset, and omits that knob; a knob the client did set is used as sent, never adjusted. The
broker knows what the client cannot: how much work is waiting for the consumer group, how
stale it is, and how fast the group's consumers get through what they are handed. Each
process keeps, per lane (what a pop reads and its consumer group), a few smoothed readings:

- **ready**: partitions with work for the lane (the hints waiting for it, see hot_partitions.py, and
  what its pops claimed). The width, the partitions one pop may claim, is that shared among
  the lane's pops in flight in this process (parked long polls included), so one consumer
  does not take everything while others wait; while the messages delivered are older than
  :data:`LAG_TARGET` (the consumers are behind), it doubles instead, up to :data:`MAX_WIDTH`.
- **drain**: messages per second one consumer of the lane gets through, from a pop's answer to
  the ack of its lease when both pass through this process. The batch is what a consumer
  drains in :data:`DRAIN_SECONDS`, within :data:`MIN_BATCH`..:data:`MAX_BATCH`: a fast
  consumer gets fewer, fuller pops; a slow handler gets a batch it finishes well inside its
  lease.
- **waitMs**: advice for a consumer that polls without waiting, echoed with the choice:
  :data:`BUSY_WAIT_MS` while the lane was handed messages lately, :data:`IDLE_WAIT_MS` once it
  has been idle for :data:`IDLE_SECONDS`.

The plan is made again at every attempt of a long poll, so a poll woken by a burst is sized for
the burst. Everything here is advice: losing it (a restart, another process) only starts a lane
cold, and a wrong guess sizes a pop, never loses or reorders a message.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import NamedTuple

MAX_WIDTH = 64
MIN_BATCH = 100
MAX_BATCH = 1_000
DRAIN_SECONDS = 0.2
LAG_TARGET = 0.1  # seconds: delivered messages older than this mean the consumers are behind
SMOOTHING = 0.25  # weight of a new reading in each running average
BUSY_WAIT_MS = 100
IDLE_WAIT_MS = 1_000
IDLE_SECONDS = 5.0
FORGET_SECONDS = 60.0  # a lane unused this long is dropped
MAX_LEASES = 10_000  # leases awaiting their ack, for the drain readings


class Plan(NamedTuple):
    """How one pop is sized, and what the answer echoes under ``autopilot``."""

    batch: int
    partitions: int
    wait_ms: int

    def echo(self) -> dict:
        return {"partitions": self.partitions, "batch": self.batch, "waitMs": self.wait_ms}


class _Lane:
    __slots__ = ("delivered_at", "drain", "inflight", "lag", "observed", "ready", "used_at", "width")

    def __init__(self, now: float) -> None:
        self.ready = 0.0  # running average of partitions with work
        self.lag = 0.0  # running average age, in seconds, of the oldest message a pop delivered
        self.drain = 0.0  # running average of messages a second a consumer gets through (0: unknown)
        self.width = 0  # the last width chosen (0: none yet)
        self.inflight = 0  # pops of the lane running in this process
        self.observed = False  # whether a pop of the lane reported what it found
        self.delivered_at = now  # a new lane counts as busy until it has been idle a while
        self.used_at = now


def _smooth(average: float, reading: float) -> float:
    return reading if average <= 0 else average + SMOOTHING * (reading - average)


class Autopilot:
    """Per process: the lanes' readings, and the leases awaiting their ack."""

    def __init__(self) -> None:
        self._lanes: dict[tuple, _Lane] = {}
        self._leases: OrderedDict[str, tuple[tuple, int, float]] = OrderedDict()
        self._swept_at = time.monotonic()

    def begin(self, lane: tuple) -> None:
        """A pop of ``lane`` starts (it counts among the lane's pops until :meth:`end`)."""
        now = time.monotonic()
        if now - self._swept_at >= FORGET_SECONDS:
            self._forget_idle(now)
        state = self._lanes.get(lane)
        if state is None:
            state = self._lanes[lane] = _Lane(now)
        state.inflight += 1
        state.used_at = now

    def end(self, lane: tuple) -> None:
        state = self._lanes.get(lane)
        if state is not None:
            state.inflight = max(state.inflight - 1, 0)

    def plan(self, lane: tuple, batch: int | None, partitions: int | None, waiting_hints: int) -> Plan:
        """The sizing of one attempt: the client's values where it gave them, the lane's
        otherwise. ``waiting_hints``: the partitions announced to the lane and not taken yet."""
        state = self._lanes[lane]
        if partitions is None:
            # a lane that has seen nothing yet may meet a whole backlog: it starts wide
            ready = max(state.ready if state.observed else MAX_WIDTH, float(waiting_hints))
            width = math.ceil(ready / max(state.inflight, 1))
            if state.lag > LAG_TARGET and state.width:
                width = max(width, 2 * state.width)
            partitions = state.width = min(max(width, 1), MAX_WIDTH)
        if batch is None:
            batch = MIN_BATCH if state.drain <= 0 else round(state.drain * DRAIN_SECONDS)
            batch = min(max(batch, MIN_BATCH, partitions), MAX_BATCH)
        idle = time.monotonic() - state.delivered_at >= IDLE_SECONDS
        return Plan(batch, partitions, IDLE_WAIT_MS if idle else BUSY_WAIT_MS)

    def observe(self, lane: tuple, claimed: int, waiting_hints: int, delivered: int,
                oldest_age: float | None, lease_id: str | None) -> None:
        """What one attempt found: partitions claimed, hints still waiting after it, messages
        delivered, the age of the oldest of them, and the lease they went out under."""
        state = self._lanes.get(lane)
        if state is None:
            return
        state.observed = True
        state.ready = _smooth(state.ready, float(claimed + waiting_hints)) if claimed or waiting_hints else (
            state.ready * (1 - SMOOTHING))
        if delivered:
            now = time.monotonic()
            state.delivered_at = now
            if oldest_age is not None:
                state.lag = _smooth(state.lag, max(oldest_age, 0.0))
            if lease_id:
                self._leases[lease_id] = (lane, delivered, now)
                if len(self._leases) > MAX_LEASES:
                    self._leases.popitem(last=False)

    @property
    def awaiting_acks(self) -> bool:
        """Whether a lease this process handed out under autopilot still awaits its ack."""
        return bool(self._leases)

    def acked(self, lease_id: str, count: int) -> None:
        """Acknowledgements of ``count`` messages of a lease this process handed out: a reading
        of how fast the lane's consumers get through their messages."""
        taken = self._leases.pop(lease_id, None)
        if taken is None:
            return
        lane, delivered, answered_at = taken
        state = self._lanes.get(lane)
        if state is None:
            return
        seconds = max(time.monotonic() - answered_at, 1e-3)
        state.drain = _smooth(state.drain, min(count, delivered) / seconds)

    def _forget_idle(self, now: float) -> None:
        self._swept_at = now
        for lane in [key for key, state in self._lanes.items()
                     if not state.inflight and now - state.used_at >= FORGET_SECONDS]:
            del self._lanes[lane]
