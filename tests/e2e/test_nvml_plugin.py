"""End to end on the NVML backend: ``kubegpu plugin`` (no ``--machine``) over nvidia-ml-py and the fake
libnvidia-ml.so.1, against ``kubegpu kubelet``, compared with the same profile on the simulated backend.

Driven only through what a user has: the two commands as separate processes
(:class:`kubegpu.demo.localnode.LocalNode`), ``kubegpu kubelet status``, and the fake library's control directory
standing in for the GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import profiles
from kubegpu.gpu.nvml import decode
from tests.fake_nvml import harness

pytest_plugins = ["tests.fake_nvml.fixtures"]
pytestmark = pytest.mark.e2e

#: Generous: CI has two slow cores and runs many processes at once. bench/gpu_check.py measures latencies.
DEADLINE_S = 60.0

MakeNode = Callable[..., LocalNode]


def nvml_env(fake: harness.FakeNode | None, ld_library_path: Path | None) -> dict[str, str]:
    """The plugin's environment: the fake machine, its sysfs, and where the loader finds the library."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEGPU_FAKE_NVML") and k != "LD_LIBRARY_PATH"}
    if fake is not None:
        env.update(fake.env)
        env["KUBEGPU_SYSFS_ROOT"] = str(fake.sysfs_root)
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = str(ld_library_path)
    return env


@pytest.fixture
def nodes() -> Iterator[MakeNode]:
    """Make nodes: ``nodes(machine=None, env=None, *plugin_args)`` (no machine: the plugin reads NVML)."""
    made: list[LocalNode] = []

    def make(machine: str | None = None, env: dict[str, str] | None = None, *plugin_args: str) -> LocalNode:
        node = LocalNode(machine=machine, env=env, plugin_args=list(plugin_args))
        made.append(node)
        return node

    try:
        yield make
    finally:
        for node in made:
            node.close()


def until(node: LocalNode, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll ``kubegpu kubelet status --json`` until ``check`` holds."""
    return node.wait_for(check, timeout=DEADLINE_S, cli=True)


def devices(status: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every resource's devices (id, health, NUMA), sorted by id: what the kubelet was told."""
    return {
        name: sorted(resource.get("devices", []), key=lambda d: str(d["id"]))
        for name, resource in status.get("resources", {}).items()
    }


def registered(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda s: sum(len(d) for d in devices(s).values()) == count


@pytest.mark.parametrize("profile", profiles.available())
def test_the_nvml_plugin_registers_exactly_what_the_simulated_plugin_registers(
    profile: str, nodes: MakeNode, tmp_path: Path, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", profile, fake_library)
    simulated, nvml = nodes(profile), nodes(None, nvml_env(fake, fake.library_dir))
    for node in (simulated, nvml):
        node.start_kubelet()
        node.start_plugin()
    expected_count = len(fake.machine.gpus)  # the plugin's default MIG strategy advertises whole GPUs
    want = devices(until(simulated, registered(expected_count)))
    got = devices(until(nvml, registered(expected_count)))
    assert got == want
    assert "nvidia.com/gpu" in got
    assert {d["id"] for d in got["nvidia.com/gpu"]} == {g.uuid for g in fake.machine.gpus}
    # NUMA reaches the kubelet from the sysfs root, as the simulated profile has it
    numa = {g.uuid: g.numa_node for g in fake.machine.gpus}
    assert all(d["numa"] == ([] if numa[d["id"]] is None else [numa[d["id"]]]) for d in got["nvidia.com/gpu"])


def test_an_xid_79_reported_by_nvml_makes_that_gpu_unhealthy_in_the_emulator(
    nodes: MakeNode, tmp_path: Path, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", "dgx-a100", fake_library)
    node = nodes(None, nvml_env(fake, fake.library_dir))
    node.start_kubelet()
    node.start_plugin()
    # The plugin subscribes to health events before it registers; from here on NVML events reach it.
    until(node, registered(8))
    uuid = fake.machine.gpus[2].uuid

    def health(status: dict[str, Any]) -> dict[str, str]:
        return {d["id"]: d["health"] for d in devices(status).get("nvidia.com/gpu", [])}

    fake.xid(2, 79)
    status = until(node, lambda s: health(s).get(uuid) == "Unhealthy")
    assert [i for i, state in health(status).items() if state != "Healthy"] == [uuid]
    assert status["resources"]["nvidia.com/gpu"]["allocatable"] == 7


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        (harness.DRIVER_NOT_LOADED, "the NVIDIA kernel driver is not loaded"),
        (harness.LIB_RM_VERSION_MISMATCH, "driver/library version mismatch"),
    ],
    ids=["driver-not-loaded", "driver-library-mismatch"],
)
def test_nvml_init_failure_makes_the_plugin_exit_nonzero_naming_the_library(
    code: int, cause: str, nodes: MakeNode, tmp_path: Path, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", "pcie-4xt4", fake_library)
    fake.init_error(code)
    node = nodes(None, nvml_env(fake, fake.library_dir))
    plugin = node.start_plugin()
    assert plugin.wait(DEADLINE_S) != 0
    log = node.log("plugin")
    assert cause in log
    assert str(fake.library_dir / decode.LIBRARY_NAME) in log or "libnvidia-ml.so" in log


def test_a_missing_nvml_library_makes_the_plugin_exit_nonzero_naming_the_paths_tried(
    nodes: MakeNode,
) -> None:
    node = nodes(None, nvml_env(None, None))
    plugin = node.start_plugin()
    assert plugin.wait(DEADLINE_S) != 0
    log = node.log("plugin")
    assert "libnvidia-ml.so.1 not found; looked in: /driver-root/usr/lib64/libnvidia-ml.so.1" in log
    assert "default loader path" in log


def test_with_mixed_mig_the_nvml_plugin_registers_exactly_the_simulated_plugins_mig_resources(
    nodes: MakeNode, tmp_path: Path, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", "a100-mig", fake_library)
    mixed = ("--mig-strategy", "mixed")
    simulated, nvml = nodes("a100-mig", None, *mixed), nodes(None, nvml_env(fake, fake.library_dir), *mixed)
    for node in (simulated, nvml):
        node.start_kubelet()
        node.start_plugin()
    machine = fake.machine
    mig_devices = [m for g in machine.gpus if g.mig_enabled for m in g.mig_devices]
    expected_count = len(mig_devices) + sum(1 for g in machine.gpus if not g.mig_enabled)
    want = devices(until(simulated, registered(expected_count)))
    got = devices(until(nvml, registered(expected_count)))
    assert got == want
    assert {name for name in got if name.startswith("nvidia.com/mig-")} == {
        f"nvidia.com/mig-{m.profile.replace('+', '.')}" for m in mig_devices
    }
    assert {d["id"] for name, devs in got.items() if name != "nvidia.com/gpu" for d in devs} == {
        m.uuid for m in mig_devices
    }


def test_nvml_init_failure_with_fail_on_init_error_false_keeps_running_with_no_resources_and_says_why(
    nodes: MakeNode, tmp_path: Path, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", "pcie-4xt4", fake_library)
    fake.init_error(harness.DRIVER_NOT_LOADED)
    node = nodes(None, nvml_env(fake, fake.library_dir), "--fail-on-init-error=false")
    node.start_kubelet()
    plugin = node.start_plugin()
    waiting = node.wait_log("plugin", "No devices found. Waiting indefinitely.", timeout=DEADLINE_S)
    assert plugin.poll() is None, node.log("plugin")
    assert "the NVIDIA kernel driver is not loaded" in waiting and "libnvidia-ml.so" in waiting
    assert node.cli_status().get("resources", {}) == {}
    plugin.terminate()
    assert plugin.wait(DEADLINE_S) == 0
