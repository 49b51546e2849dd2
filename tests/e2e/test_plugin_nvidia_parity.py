"""End to end, one config per NVIDIA-parity feature: ``kubegpu plugin`` and ``kubegpu kubelet`` as separate
processes (:class:`kubegpu.demo.localnode.LocalNode`), asserting what the emulator shows (``status``, ``admit``).

MIG mixed, time-slicing renamed with ``failRequestsGreaterThanOne``, MPS with ``kubegpu mps-daemon``, each
device-list strategy, ``--device-id-strategy index``, ``--pass-device-specs`` with an injected dev root, an XID
on a GPU with 4 replicas, init-container reuse (must_include) and NUMA-local placement.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode, pod_manifest
from kubegpu.gpu import faults, profiles
from kubegpu.kubelet import errors as kubelet_errors
from tests.deviceplugin.fixtures import fake_mps

pytestmark = pytest.mark.e2e

#: Generous: CI has two slow cores and runs many processes at once.
DEADLINE_S = 60.0
VENDOR = "k8s.device-plugin.nvidia.com"

Start = Callable[..., LocalNode]


@pytest.fixture
def node() -> Iterator[Start]:
    """Start an emulator and a plugin with these arguments; everything is stopped and removed afterwards."""
    made: list[LocalNode] = []

    def start(machine: str, *plugin_args: str) -> LocalNode:
        running = LocalNode(machine=machine, plugin_args=list(plugin_args))
        made.append(running)
        running.start_kubelet()
        running.start_plugin()
        return running

    yield start
    for running in made:
        running.close()


def resources(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = status.get("resources", {})
    return found


def capacities(status: dict[str, Any]) -> dict[str, int]:
    return {name: r["capacity"] for name, r in resources(status).items() if r["capacity"]}


def wait_capacity(running: LocalNode, expected: dict[str, int]) -> dict[str, Any]:
    try:
        return running.wait_for(lambda s: capacities(s) == expected, timeout=DEADLINE_S)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nplugin log:\n{running.log_tail('plugin', 30)}") from None


def main(admitted: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = admitted["containers"]["main"]
    return container


def test_mixed_mig_advertises_each_mig_profile_with_its_device_count(node: Start) -> None:
    machine = profiles.load("a100-mig")
    expected = Counter(
        f"nvidia.com/mig-{m.profile.replace('+', '.')}" for g in machine.gpus if g.mig_enabled for m in g.mig_devices
    )
    expected["nvidia.com/gpu"] = sum(1 for g in machine.gpus if not g.mig_enabled)
    running = node("a100-mig", "--mig-strategy", "mixed")
    status = wait_capacity(running, dict(expected))
    for name, resource in resources(status).items():
        assert Path(resource["endpoint"]["socket"]).name == f"nvidia-{name.split('/')[1]}.sock"
    admitted = running.admit(pod_manifest("mig", 1, resource="nvidia.com/mig-3g.40gb"))
    (uuid,) = main(admitted)["resources"]["nvidia.com/mig-3g.40gb"]
    assert main(admitted)["envs"]["NVIDIA_VISIBLE_DEVICES"] == uuid and uuid.startswith("MIG-")


def test_time_slicing_renamed_gives_32_shared_and_two_replicas_get_nvidias_error(node: Start, tmp_path: Path) -> None:
    config = tmp_path / "ts.yaml"
    config.write_text(
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: true\n"
        "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
    )
    running = node("dgx-a100", "--config-file", str(config))
    wait_capacity(running, {"nvidia.com/gpu.shared": 32})
    one = running.admit(pod_manifest("one", 1, resource="nvidia.com/gpu.shared"))
    (replica,) = main(one)["resources"]["nvidia.com/gpu.shared"]
    assert main(one)["envs"]["NVIDIA_VISIBLE_DEVICES"] == replica.split("::")[0]
    with pytest.raises(kubelet_errors.ControlError) as caught:
        running.admit(pod_manifest("two", 2, resource="nvidia.com/gpu.shared"))
    assert caught.value.reason == "UnexpectedAdmissionError"
    assert (
        'invalid allocation request for "nvidia.com/gpu.shared": invalid request: '
        "maximum request size for shared resources is 1; found 2" in caught.value.message
    )


def test_mps_with_the_mps_daemon_shares_each_gpu_and_mounts_its_pipe(node: Start, tmp_path: Path) -> None:
    fakes = fake_mps.install(tmp_path)
    mps_root = tmp_path / "mps"
    config = tmp_path / "mps.yaml"
    config.write_text("sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}")
    # No mount namespaces here: the MPS root is at the same path for the host and both processes
    # (tests/e2e/test_mps_chart_layout.py runs NVIDIA's chart layout, a host dir bound at the container path).
    common = ["--config-file", str(config), "--mps-container-root", str(mps_root)]
    running = node("pcie-4xt4", *common, "--mps-root", str(mps_root))
    daemon = subprocess.Popen(
        [
            *(sys.executable, "-m", "kubegpu", "mps-daemon", "--machine", "pcie-4xt4", *common),
            *("--control-program", str(fakes["nvidia-cuda-mps-control"]), "--nvidia-smi", str(fakes["nvidia-smi"])),
        ],
        env={**os.environ, "FAKE_MPS_RECORD": str(fakes["record"])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The plugin waits for the daemon's readiness files, then registers.
        wait_capacity(running, {"nvidia.com/gpu": 16})
        admitted = running.admit(pod_manifest("mps", 1))
        container = main(admitted)
        assert container["envs"]["CUDA_MPS_PIPE_DIRECTORY"] == str(mps_root / "nvidia.com/gpu/pipe")
        mounts = {m["container_path"]: m["host_path"] for m in container["mounts"]}
        assert mounts == {
            str(mps_root / "nvidia.com/gpu/pipe"): str(mps_root / "nvidia.com/gpu/pipe"),
            "/dev/shm": str(mps_root / "shm"),
        }
        plugin_log = (running.log_dir / "plugin.log").read_text()
        assert plugin_log.count('msg="waiting for the MPS daemon"') <= 1
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(DEADLINE_S) == 0


STRATEGIES = ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_device_list_strategy_reaches_the_container(node: Start, strategy: str, tmp_path: Path) -> None:
    spec_dir = tmp_path / "cdi"
    running = node("pcie-4xt4", "--device-list-strategy", strategy, "--cdi-spec-dir", str(spec_dir))
    wait_capacity(running, {"nvidia.com/gpu": 4})
    container = main(running.admit(pod_manifest("p", 2)))
    ids = container["resources"]["nvidia.com/gpu"]
    names = [f"{VENDOR}/gpu={i}" for i in ids]
    if strategy == "envvar":
        assert container["envs"] == {"NVIDIA_VISIBLE_DEVICES": ",".join(ids)}
    elif strategy == "volume-mounts":
        assert container["envs"] == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
        assert [(m["container_path"], m["host_path"]) for m in container["mounts"]] == [
            (f"/var/run/nvidia-container-devices/{i}", "/dev/null") for i in ids
        ]
    elif strategy == "cdi-annotations":
        ((key, value),) = container["annotations"].items()
        assert key.startswith("cdi.k8s.io/nvidia-device-plugin_") and value == ",".join(names)
        assert container["envs"] == {} and container["cdi_devices"] == []
    else:
        assert container["cdi_devices"] == names
        assert container["envs"] == {} and container["annotations"] == {}
    cdi_files = sorted(p.name for p in spec_dir.glob("*.json")) if spec_dir.exists() else []
    assert cdi_files == ([f"{VENDOR}-gpu.json"] if strategy.startswith("cdi-") else [])
    if cdi_files:
        spec = json.loads((spec_dir / cdi_files[0]).read_text())
        assert set(ids) <= {d["name"] for d in spec["devices"]}


def test_index_strategy_passes_gpu_indices_while_the_kubelet_sees_uuids(node: Start) -> None:
    machine = profiles.load("dgx-a100")
    running = node("dgx-a100", "--device-id-strategy", "index")
    wait_capacity(running, {"nvidia.com/gpu": 8})
    container = main(running.admit(pod_manifest("p", 2)))
    ids = container["resources"]["nvidia.com/gpu"]
    uuids = [g.uuid for g in machine.gpus]
    assert all(i in uuids for i in ids)
    assert container["envs"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(str(uuids.index(i)) for i in ids)


def test_pass_device_specs_with_an_injected_dev_root(node: Start, tmp_path: Path) -> None:
    machine = profiles.load("dgx-a100")
    mounted = tmp_path / "driver-root"  # the host's driver root as the plugin container sees it
    (mounted / "dev").mkdir(parents=True)
    for present in ("nvidiactl", "nvidia-uvm"):
        (mounted / "dev" / present).touch()
    running = node(
        "dgx-a100",
        *("--pass-device-specs", "--dev-root", "/host", "--container-driver-root", str(mounted)),
    )
    wait_capacity(running, {"nvidia.com/gpu": 8})
    container = main(running.admit(pod_manifest("p", 1)))
    (uuid,) = container["resources"]["nvidia.com/gpu"]
    minor = next(g.minor for g in machine.gpus if g.uuid == uuid)
    assert [(d["container_path"], d["host_path"], d["permissions"]) for d in container["devices"]] == [
        ("/dev/nvidiactl", "/host/dev/nvidiactl", "rw"),
        ("/dev/nvidia-uvm", "/host/dev/nvidia-uvm", "rw"),
        (f"/dev/nvidia{minor}", f"/host/dev/nvidia{minor}", "rw"),
    ]


def test_an_xid_on_a_gpu_with_four_replicas_marks_all_four_unhealthy(node: Start, tmp_path: Path) -> None:
    config = tmp_path / "ts.yaml"
    config.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}")
    running = node("dgx-a100", "--config-file", str(config), "--health-recovery-quiet-period", "0")
    wait_capacity(running, {"nvidia.com/gpu": 32})
    uuid = profiles.load("dgx-a100").gpus[5].uuid
    running.inject(faults.Fault(kind="xid", gpu=5, xid=79))
    status = running.wait_for(lambda s: resources(s)["nvidia.com/gpu"]["allocatable"] == 28, timeout=DEADLINE_S)
    unhealthy = sorted(d["id"] for d in resources(status)["nvidia.com/gpu"]["devices"] if d["health"] != "Healthy")
    assert unhealthy == [f"{uuid}::{n}" for n in range(4)]  # NVIDIA marks one of them (#1929)
    log = (running.log_dir / "plugin.log").read_text()
    lines = [line for line in log.splitlines() if 'msg="device unhealthy"' in line]
    assert len(lines) == 4 and all("xid=79" in line and "GPU has fallen off the bus" in line for line in lines)


def test_an_init_containers_gpus_are_kept_by_the_main_container(node: Start) -> None:
    running = node("dgx-a100")
    wait_capacity(running, {"nvidia.com/gpu": 8})
    admitted = running.admit(pod_manifest("train", 4, init_gpus=2))
    init = set(admitted["containers"]["warmup"]["resources"]["nvidia.com/gpu"])
    app = set(main(admitted)["resources"]["nvidia.com/gpu"])
    assert len(init) == 2 and len(app) == 4 and init <= app


def test_four_gpus_on_a_free_dgx_a100_come_from_one_numa_node(node: Start) -> None:
    machine = profiles.load("dgx-a100")
    running = node("dgx-a100")
    wait_capacity(running, {"nvidia.com/gpu": 8})
    ids = main(running.admit(pod_manifest("p", 4)))["resources"]["nvidia.com/gpu"]
    numa = {g.uuid: g.numa_node for g in machine.gpus}
    assert len({numa[i] for i in ids}) == 1
