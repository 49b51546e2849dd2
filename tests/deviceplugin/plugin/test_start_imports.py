"""The plugin's start path imports only what registration needs (issue 16: start -> registered <= 150 ms).

A real ``kubegpu plugin`` process on a simulated machine registers with a real ``kubegpu kubelet`` emulator
while Python reports every import it makes (``PYTHONPROFILEIMPORTTIME``, the environment form of
``python -X importtime``); the modules named here cost start time and memory that only some configurations
need, and are imported where those configurations are handled.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from kubegpu.demo.localnode import LocalNode
from tests.fake_nvml import harness

pytest_plugins = ["tests.fake_nvml.fixtures"]

#: Modules a plugin serving plain GPUs of a shipped simulated profile must not import before it is stopped.
NOT_ON_THE_START_PATH = (
    "yaml",  # shipped profiles are read from their precomputed canonical JSON
    "kubegpu.gpu.compact",  # ... so the compact profile schema is not built either
    "uuid",  # imports platform; CDI annotation ids are made from os.urandom
    "platform",
    "importlib.resources",  # the profiles directory is next to the module
    "importlib.metadata",
    "pkg_resources",
    "lightkube",  # only with --node-name
    "prometheus_client",  # only with --metrics-listen
    "kubegpu.deviceplugin.cdi",  # only with a cdi-* device list strategy
    "kubegpu.deviceplugin.mps.control",  # only for MPS-shared resources
    "kubegpu.gpu.nvml",  # only without --machine
    "kubegpu.gpu.telemetry",  # the plugin never samples telemetry
    "pynvml",
    "numpy",
    "http.server",
    "zipfile",
    "asyncinotify",  # its libc lookup runs ldconfig; kubegpu.common.inotify dlopens the process's own
    "ctypes.util",
    "tempfile",
    "concurrent.futures.thread",  # discovery runs in a thread of its own, not asyncio's executor
    # the placement solvers: config validation reads kubegpu.placement.names; the first GetPreferredAllocation
    # loads the rest
    "kubegpu.placement.policies",
    "kubegpu.placement.partition",
    "kubegpu.placement.subsets",
    "kubegpu.placement.shared",
    "kubegpu.placement.weights",
    "kubegpu.placement.matrix",
    "kubegpu.deviceplugin.rm.responses",  # the first Allocate loads it; a start builds only its ResponseOptions
)

#: Further modules a start on a simulated machine must not import (an NVML start may need some).
NOT_ON_A_SIMULATED_START = (
    "shutil",  # argparse sizes help with it; the plugin's parser finds the width itself
    "bz2",
    "lzma",
    "kubegpu.deviceplugin.rm.mig_caps",  # the host's MIG minors (NVML); simulated MIG uses the driver's numbering
)

IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$", re.MULTILINE)


def imported_by_a_start(
    plugin_args: list[str], machine: str | None = "dgx-a100", env: dict[str, str] | None = None
) -> set[str]:
    """Every module a plugin imported from exec until SIGTERM, having registered its 8 GPUs."""
    env = {**(os.environ if env is None else env), "PYTHONPROFILEIMPORTTIME": "1"}
    with LocalNode(machine=machine, plugin_args=plugin_args, env=env) as node:
        node.start_kubelet()
        node.start_plugin()
        node.wait_for(lambda s: s["resources"].get("nvidia.com/gpu", {}).get("allocatable") == 8, timeout=30)
        node.stop("plugin", signal.SIGTERM)
        log = node.log("plugin")
    return set(IMPORT_LINE.findall(log))


def loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.e2e
def test_a_plain_start_imports_nothing_registration_does_not_need() -> None:
    modules = imported_by_a_start([])
    assert "grpc" in modules and "kubegpu.deviceplugin.plugin.supervisor" in modules  # the report is read
    assert [name for name in NOT_ON_THE_START_PATH + NOT_ON_A_SIMULATED_START if loaded(modules, name)] == []


@pytest.mark.e2e
def test_a_start_on_nvml_imports_nothing_registration_does_not_need(tmp_path: Path, fake_library: Path) -> None:
    fake = harness.stage(tmp_path / "fake", "dgx-a100", fake_library)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEGPU_FAKE_NVML") and k != "LD_LIBRARY_PATH"}
    env.update(fake.env, KUBEGPU_SYSFS_ROOT=str(fake.sysfs_root), LD_LIBRARY_PATH=str(fake.library_dir))
    modules = imported_by_a_start([], machine=None, env=env)
    assert loaded(modules, "kubegpu.gpu.nvml.binding")
    # kubegpu's own binding: not nvidia-ml-py, nor the ctypes.util, tempfile, shutil, bz2 and lzma it imports
    needed = ("kubegpu.gpu.nvml", "kubegpu.deviceplugin.rm.mig_caps")  # the host's MIG minors come from NVML
    nvml_path = [n for n in NOT_ON_THE_START_PATH + NOT_ON_A_SIMULATED_START if n not in needed]
    assert [name for name in nvml_path if loaded(modules, name)] == []
    assert "kubegpu.gpu.profiles" not in modules  # no machine profile on a real node


@pytest.mark.e2e
def test_a_cdi_start_imports_the_cdi_spec_writer_it_needs(tmp_path: Path) -> None:
    modules = imported_by_a_start(["--device-list-strategy", "cdi-annotations", "--cdi-spec-dir", str(tmp_path)])
    assert loaded(modules, "kubegpu.deviceplugin.cdi")
