"""The signal a stopping server sends its workers: answer every parked long poll now, empty,
instead of holding the client until its timeout (server.py sends it, http/app.py heeds it)."""

import signal

DRAIN_SIGNAL = signal.SIGUSR1
