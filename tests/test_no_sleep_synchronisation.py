"""Tests wait on events, not sleeps: no test calls ``time.sleep``/``asyncio.sleep`` outside the allow-list below.

A sleep before an assertion makes a test slow on a quiet machine and wrong on a busy one; the suite waits
with :mod:`tests.polling` (a condition and a deadline) or on the event itself (``asyncio.wait`` with a
timeout when something must *not* happen). The few sleeps left are not synchronisation; each is listed
with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
SUPERVISOR = "deviceplugin/plugin/test_supervisor.py"

#: (file relative to tests/, enclosing function) -> why this sleep is not synchronisation.
ALLOWED = {
    ("polling.py", "wait_until"): "the poll interval of the suite's one polling helper",
    ("polling.py", "eventually"): "the poll interval of the suite's one polling helper",
    ("kubelet/stubplugin.py", "_maybe_fail"): "a deliberately slow plugin answer (delay_s): the behaviour under test",
    (
        "deviceplugin/plugin/test_supervisor.py",
        "test_a_dead_kubelet_socket_is_retried_quietly_until_a_live_kubelet_takes_its_place",
    ): ("an observation window: several 1 s retries must pass to show the warning is logged once"),
    (SUPERVISOR, "test_a_recreated_socket_directory_is_followed"): (
        "the gap in which the socket directory does not exist: the situation under test"
    ),
    (SUPERVISOR, "test_an_mps_resource_waits_for_the_mps_daemons_readiness_files"): (
        "an observation window: several 1 s retries must pass to show the wait is logged once"
    ),
}


def _sleeps(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every ``time.sleep``/``asyncio.sleep`` call (or a bare imported ``sleep``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "asyncio")
        for alias in node.names
        if alias.name == "sleep"
    }
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                dotted = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "sleep"
                    and isinstance(func.value, ast.Name)
                    and func.value.id in ("time", "asyncio")
                )
                if dotted or (isinstance(func, ast.Name) and func.id in bare):
                    found.append((function, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_no_test_sleeps_to_synchronise() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{line} in {function}"
        for path in sorted(TESTS.rglob("*.py"))
        for function, line in _sleeps(path)
        if (path.relative_to(TESTS).as_posix(), function) not in ALLOWED
    ]
    assert offenders == [], "wait on a condition (tests/polling.py) instead of sleeping: " + ", ".join(offenders)


def test_every_allowed_sleep_still_exists() -> None:
    present = {(p.relative_to(TESTS).as_posix(), f) for p in TESTS.rglob("*.py") for f, _ in _sleeps(p)}
    assert set(ALLOWED) <= present, f"stale allow-list entries: {sorted(set(ALLOWED) - present)}"


def test_the_scan_finds_a_sleep(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import asyncio, time\nfrom time import sleep as nap\n"
        "async def t():\n    await asyncio.sleep(1)\n    time.sleep(1)\n    nap(1)\n"
    )
    assert _sleeps(probe) == [("t", 4), ("t", 5), ("t", 6)]
