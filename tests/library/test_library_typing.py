"""The library's public API and its example pass ``mypy --strict``, and so does the two-driver
suite's interface, which ``reginamq.Broker`` must satisfy (tests/plane/driver.py); ``py.typed``
ships. The engine modules the library imports are read for their types only
(``--follow-imports=silent``), as mypy reads an installed package in an application's check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import reginamq

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes_on_the_library_and_its_example():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", "reginamq/library",
         "examples/library_quickstart.py", "tests/plane/driver.py"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_says_it_is_typed():
    assert (Path(reginamq.__file__).parent / "py.typed").exists()
