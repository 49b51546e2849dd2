"""How the demos talk: rich tables and check marks for people, or one JSON object per line (``--json``).

Owns :class:`Reporter`, shared by ``kubegpu demo`` and ``kubegpu demo cluster``: steps, lines, tables, checks
(each recorded for the summary). Must not know what a demo does.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reporter:
    """Prints the demo for people (rich tables) or as JSON lines (``--json``)."""

    as_json: bool
    started: float = field(default_factory=time.monotonic)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        from rich.console import Console

        # Piped output would wrap at 80 columns; the tables read better a little wider.
        self.console = Console(highlight=False, stderr=False, width=None if sys.stdout.isatty() else 110)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def emit(self, event: str, text: str = "", **data: Any) -> None:
        if self.as_json:
            print(json.dumps({"event": event, "t": self.elapsed(), **data}), flush=True)
        elif text:
            self.console.print(text)

    def step(self, title: str) -> None:
        if not self.as_json:
            self.console.rule(f"[bold]{title}[/] [dim]({self.elapsed():.1f} s)[/]")

    def table(self, title: str, columns: list[str], rows: list[list[str]]) -> None:
        if self.as_json:
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append({"check": name, "ok": ok, "detail": detail})
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        self.emit("check", f"{mark} {name}{f' — {detail}' if detail else ''}", check=name, ok=ok, detail=detail)
        return ok
