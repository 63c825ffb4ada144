"""``python -m reginamq``: the same command as ``reginamq``."""

from reginamq.cli import main

main()
