"""Points where the fault tests kill a broker process (tests/faults/test_transaction_kills.py):
``kill -9`` at an exact step of a path, which a signal sent from outside cannot hit.

A process started with ``REGINAMQ_FAILPOINTS`` set to a file's path reads the file at each
point it reaches. When the file names that point, the process removes the file and kills
itself with SIGKILL, as an outside ``kill -9`` would. Removing it first means that exactly one
process dies per arming, and the worker respawned in its place carries on. Unset, as in every
deployment, a point costs one comparison.
"""

from __future__ import annotations

import contextlib
import os
import signal

_ARMED = os.environ.get("REGINAMQ_FAILPOINTS") or None


def reach(point: str) -> None:
    """Dies here if the armed file names ``point`` (see the module header)."""
    if _ARMED is None:
        return
    with contextlib.suppress(FileNotFoundError):
        with open(_ARMED) as armed:
            if armed.read().strip() != point:
                return
        os.remove(_ARMED)  # another process that got here first removed it: it dies, not this one
        os.kill(os.getpid(), signal.SIGKILL)
