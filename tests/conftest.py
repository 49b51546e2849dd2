"""Fixtures shared by every test: short socket dirs; ../shared handling comes from ``tests.shared``.

Unix socket paths are limited to 107 bytes, and pytest's tmp_path can be long,
so tests that bind sockets use ``sock_dir`` (a short directory under /tmp).
The ``kube`` fixture (an API server per test: tests/kubeapi/fixture.py) is registered here too.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.shared import REPO, SHARED, pytest_runtest_makereport

# The hook turns skips for missing ../shared into failures in CI; pytester runs that hook's own test.
__all__ = ["REPO", "SHARED", "pytest_runtest_makereport", "sock_dir"]
pytest_plugins = ["tests.kubeapi.fixture", "pytester"]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short, fresh directory for unix sockets, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="kg-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
