"""The progress display: a live bar (elapsed / duration, last interval) on a terminal, plain
lines otherwise, so a long run shows it is alive and a log file stays readable."""

from __future__ import annotations

import sys

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class Display:
    def __init__(self, total_seconds: float, live: bool | None = None):
        self.total = total_seconds
        self.live = sys.stdout.isatty() if live is None else live
        self._progress = None
        self._task = None

    def __enter__(self) -> Display:
        if self.live:
            self._progress = Progress(TextColumn("[bold]bench"), BarColumn(), TimeElapsedColumn(),
                                      TextColumn("/ {task.total:.0f}s {task.fields[phase]}"),
                                      TextColumn("{task.fields[status]}"), transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task("bench", total=self.total, phase="", status="")
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def print(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def update(self, elapsed: float, phase: str, status: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=min(elapsed, self.total), phase=phase, status=status)
