"""The library's public API and its example pass ``mypy --strict``; ``py.typed`` ships."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import reginamq

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes_on_the_library_and_its_example():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "reginamq/library",
         "examples/library_quickstart.py"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_says_it_is_typed():
    assert (Path(reginamq.__file__).parent / "py.typed").exists()
