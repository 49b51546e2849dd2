"""Where the suite finds ``../shared`` (traces, reference tables, schemas), and what happens when it is absent.

Outside CI a test that needs ../shared is skipped with a reason naming the missing path, so a clean
clone passes. In CI (``CI`` set to anything but ``""``, ``0`` or ``false``) ../shared must be there:
the hook below turns those skips, and only those, into failures. Nothing here reads ../shared at import.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

#: Every skip for missing shared material starts with this, which is how the CI hook recognises it.
SKIP_PREFIX = "needs ../shared:"


def in_ci(environ: dict[str, str] | None = None) -> bool:
    """Whether ``CI`` says this run is CI (GitHub, GitLab and our ``.ci/run`` set ``CI=true``)."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


def missing(*parts: str, root: Path = SHARED) -> str | None:
    """The skip reason when ``root/parts`` is absent, else None."""
    path = root.joinpath(*parts)
    if path.exists():
        return None
    return f"{SKIP_PREFIX} {'/'.join(parts)} not found (looked at {path})"


def shared_path(*parts: str) -> Path:
    """``../shared/parts`` for use inside a test or fixture; skips the test (naming the path) when absent."""
    reason = missing(*parts)
    if reason is not None:
        pytest.skip(reason)
    return SHARED.joinpath(*parts)


def needs(*parts: str, root: Path = SHARED) -> pytest.MarkDecorator:
    """A mark for tests (or parameter sets built at collection) that need ``../shared/parts``."""
    reason = missing(*parts, root=root)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """In CI, a test skipped because ../shared is missing fails instead: CI must run every one of them.

    A skip raised in the test body becomes a failure, one from a mark (raised at setup) an error.
    """
    report = yield
    if report.skipped and in_ci() and SKIP_PREFIX in str(report.longrepr):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"CI is set, so ../shared must be present: {reason}"
    return report
