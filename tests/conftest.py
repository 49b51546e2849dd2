"""Fixtures shared by every test: paths to the shared reference material and short socket dirs.

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

pytest_plugins = ["tests.kubeapi.fixture"]

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short, fresh directory for unix sockets, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="kg-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
