"""``reginamq bench``: Queen's open-loop load generator (goload semantics) for reginamq.

The instrument measures a broker the way Queen measures itself, so a reginamq report can be set
beside a Queen report line by line: an open-loop pacer offers a fixed rate, closed-loop consumers
drain, end-to-end latency is taken from each message's *scheduled* push instant (coordinated
omission corrected), and every line says how much CPU the broker, PostgreSQL and the generator
itself used. ``reginamq bench ceiling`` measures the same PostgreSQL with plain SQL, so the
broker's figure has a denominator.

Modules: :mod:`.config` (the run's options), :mod:`.stats` (histograms and counters),
:mod:`.load` (producer and consumer processes), :mod:`.system` (CPU/RSS/database size),
:mod:`.broker` (an own broker), :mod:`.runner` (the run), :mod:`.report` (lines, JSON, plot),
:mod:`.ceiling` (the raw PostgreSQL rate), :mod:`.cli` (the command).
"""
