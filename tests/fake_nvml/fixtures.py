"""pytest fixtures over the fake NVML library, imported by the NVML test modules.

``fake_library``: the built library (the test is skipped only when no C compiler exists).
``nvml_machine``: stages a profile and opens an in-process :class:`NvmlBackend` on it,
closing every backend afterwards (the fake reads its environment at each first nvmlInit),
and points nvidia-ml-py (``pynvml``, the reference client the fake's own tests call it
through) at the library the backend loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from kubegpu.gpu.model import Machine
from kubegpu.gpu.nvml import NvmlBackend, binding
from tests.fake_nvml import harness
from tests.fake_nvml.harness import OpenMachine


@pytest.fixture(scope="session")
def fake_library() -> Path:
    try:
        return harness.library()
    except harness.NoCompiler as exc:
        pytest.skip(str(exc))


class _BackendsLibrary:
    """The libnvidia-ml.so.1 kubegpu's binding loaded (one per process), as nvidia-ml-py looks symbols up in it."""

    def __getattr__(self, name: str) -> Any:
        library = binding.loaded()
        if library is None:
            raise AttributeError(name)
        return getattr(library, name)


@pytest.fixture
def nvml_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_library: Path) -> Iterator[OpenMachine]:
    opened: list[NvmlBackend] = []
    monkeypatch.setattr(pynvml, "nvmlLib", _BackendsLibrary())

    def open_machine(machine: str | Machine, wait_ms: int = 50) -> tuple[harness.FakeNode, NvmlBackend]:
        name = machine if isinstance(machine, str) else machine.name
        node = harness.stage(tmp_path / name, machine, fake_library)
        for key, value in node.env.items():
            monkeypatch.setenv(key, value)
        backend = NvmlBackend(
            driver_root=str(node.driver_root),
            container_driver_root=str(tmp_path / "no-container-root"),
            sysfs_root=str(node.sysfs_root),
            wait_ms=wait_ms,
        )
        opened.append(backend)
        return node, backend

    try:
        yield open_machine
    finally:
        for backend in opened:
            backend.close()
