"""Output of the operator commands: rich tables for people, JSON for programs (``--json``).

Data goes to stdout and notes to stderr, so a pipe receives only data. JSON is written as the
broker answered it or the command assembled it (one document, or one line per item for
streams, flushed at once); tables are not squeezed into 80 columns when stdout is not a
terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def cell(value: Any, width: int | None = None) -> str:
    """A table cell: ``-`` for nothing, yes/no for booleans, compact JSON for structures."""
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict | list):
        text = dumps(value)
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text


class Output:
    def __init__(self, json_mode: bool):
        self.json = json_mode
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            width = None
            if not sys.stdout.isatty():  # a pipe or a file: do not squeeze tables into 80 columns
                width = max(int(os.environ.get("COLUMNS", "0") or 0), 160)
            self._console = Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False)
        return self._console

    def document(self, value: Any) -> None:
        """One JSON document on stdout (the whole answer, as the broker gave it or assembled)."""
        click.echo(dumps(value))

    def line(self, value: Any) -> None:
        """One JSON line, flushed at once (streams: pop, tail, push results)."""
        sys.stdout.write(dumps(value) + "\n")
        sys.stdout.flush()

    def note(self, text: str) -> None:
        """Information for the person at the terminal; on stderr, so stdout stays data."""
        click.echo(text, err=True)

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
              empty: str = "(none)") -> None:
        rows = list(rows)
        if not rows:
            if title:
                self.console.print(f"[bold]{title}[/bold]")
            self.console.print(empty)
            return
        table = Table(title=title, title_justify="left", title_style="bold")
        for position, name in enumerate(columns):
            values = [row[position] for row in rows if row[position] is not None]
            numeric = bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
            table.add_column(name, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            table.add_row(*(cell(v, 60) for v in row))
        self.console.print(table)

    def fields(self, pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        table = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None)
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in pairs:
            table.add_row(key, cell(value))
        self.console.print(table)

