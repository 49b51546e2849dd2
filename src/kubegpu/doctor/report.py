"""One doctor check's result and how results are printed: a line each, or ``{"checks": [...]}`` as JSON.

Must do no I/O besides returning text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    """``name`` passed (``ok``) or not; ``detail`` is what was seen, ``fix`` what to do ("" when ok)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def passed(name: str, detail: str) -> Check:
    return Check(name, True, detail, "")


def failed(name: str, detail: str, fix: str) -> Check:
    return Check(name, False, detail, fix)


def text(checks: Sequence[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"{'PASS' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
        if not check.ok:
            lines.append(f"      fix: {check.fix}")
    failures = sum(not c.ok for c in checks)
    lines.append(f"{len(checks) - failures} passed, {failures} failed")
    return "\n".join(lines)


def as_json(checks: Sequence[Check]) -> str:
    return json.dumps({"checks": [asdict(c) for c in checks]}, indent=2)
