"""The README's tour must work as written: run its Python block against a real broker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def run_tour(script, block: str) -> str:
    """Runs a tour's block as a script; asserts it printed the six orders, each customer's in
    push order, and answers what it printed."""
    script.write_text(block)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    delivered = re.findall(r"^(alice|bob) \{'customer': '\1', 'step': (\d)\}$", result.stdout, flags=re.M)
    assert sorted(delivered) == [(c, str(n)) for c in ("alice", "bob") for n in range(3)]
    for customer in ("alice", "bob"):
        steps = [int(n) for c, n in delivered if c == customer]
        assert steps == sorted(steps)
    return result.stdout


def test_readme_client_tour_runs_and_delivers_in_order(broker_url, tmp_path):
    block = python_blocks()[0]
    printed = run_tour(tmp_path / "tour.py",
                       block.replace("http://localhost:6632", broker_url).replace('"orders"', '"tour-orders"'))
    assert len(re.findall(r"^shipping \{", printed, flags=re.M)) == 6


def test_readme_library_tour_runs_and_delivers_in_order(database_url, tmp_path):
    block = python_blocks()[1]
    assert "Broker()" in block
    run_tour(tmp_path / "library_tour.py", block.replace("Broker()", f"Broker({database_url!r}, maintenance=False)")
             .replace('"orders"', '"library-tour-orders"'))
