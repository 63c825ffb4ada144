"""``reginamq bench``: Queen's open-loop load generator (goload semantics) for reginamq.

The instrument measures a broker the way Queen measures itself, so a reginamq report can be set
beside a Queen report line by line: an open-loop pacer offers a fixed rate, closed-loop consumers
drain, end-to-end latency is taken from each message's *scheduled* push instant (coordinated
omission corrected), and every line says how much CPU the broker, PostgreSQL and the generator
itself used. ``reginamq bench ceiling`` measures the same PostgreSQL with plain SQL, so the
broker's figure has a denominator.

Modules, each importing only the ones listed before it: :mod:`.config` (the run's options),
:mod:`.stats` (histograms and counters), :mod:`.child` (what every load process shares: set-up,
counting, reporting to the parent), :mod:`.verify` (per-message accounting under ``--verify``),
:mod:`.load` (producer and consumer processes), :mod:`.inprocess` (the same load calling the library
in-process, or nothing), :mod:`.system` (CPU/RSS/database size),
:mod:`.display` (the progress bar), :mod:`.report` (lines, JSON, plot), :mod:`.broker` (an own
broker), :mod:`.runner` (the run), :mod:`.ceiling` (the raw PostgreSQL rate), :mod:`.session`
(one invocation: target, run, report, tear-down), :mod:`.cli` (the command, which loads the
session only when a bench runs).
"""
