"""End to end: ``kubegpu kubelet`` and a stub plugin as separate processes (:class:`kubegpu.demo.localnode.LocalNode`),
driven through the CLI.

Covers what a plugin author does: start the emulator, watch the plugin register,
admit and delete pods with ``kubegpu kubelet``, survive ``kill -9`` of the
emulator (checkpoint restore, re-registration, no new Allocate), stop cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode
from kubegpu.kubelet import client
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

R = "example.com/gpu"


def pod_yaml(path: Path, name: str, count: int) -> Path:
    path.write_text(
        f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
spec:
  containers:
  - name: main
    image: cuda
    resources:
      limits:
        {R}: {count}
        cpu: 500m
"""
    )
    return path


@pytest.fixture
def node() -> Iterator[LocalNode]:
    with LocalNode(env={**os.environ, "PYTHONPATH": str(REPO)}) as running:  # the stub plugin lives in tests/
        yield running


def stub_plugin(node: LocalNode) -> None:
    node.spawn(
        "stubplugin",
        ["--socket-dir", str(node.socket_dir), "--devices", "8", "--numa-nodes", "2"],
        module="tests.kubelet.stubplugin",
    )


def kubelet(node: LocalNode, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubegpu kubelet ARGS --socket-dir DIR``, as a user runs it."""
    return node.cli("kubelet", *args, "--socket-dir", str(node.socket_dir))


def until(node: LocalNode, check: Callable[[dict[str, Any]], bool]) -> None:
    """Wait on the emulator's watch stream (no process start per poll)."""
    node.wait_for(check, timeout=30.0)


def gpu(status: dict[str, Any], name: str = R) -> dict[str, Any]:
    """One resource of a status (zeros when the node does not report it)."""
    resource: dict[str, Any] = status["resources"].get(name, {"capacity": 0, "allocatable": 0, "registrations": 0})
    return resource


def test_a_plugin_registers_pods_are_admitted_and_kill_9_loses_nothing(node: LocalNode, tmp_path: Path) -> None:
    node.start_kubelet()
    stub_plugin(node)
    until(node, lambda s: gpu(s)["allocatable"] == 8)
    status = node.cli_status()
    assert gpu(status)["capacity"] == 8
    assert [d["numa"] for d in gpu(status)["devices"]] == [[0]] * 4 + [[1]] * 4

    admitted = kubelet(node, "admit", str(pod_yaml(tmp_path / "two.yaml", "two", 2)), "--json")
    assert admitted.returncode == 0, admitted.stderr
    options = json.loads(admitted.stdout)["containers"]["main"]
    visible = options["envs"]["STUB_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2
    assert {"envs", "mounts", "devices", "annotations", "cdi_devices"} <= set(options)

    table = kubelet(node, "admit", str(pod_yaml(tmp_path / "one.yaml", "one", 1)))
    assert table.returncode == 0 and "pod ml/one" in table.stdout and "STUB_VISIBLE_DEVICES" in table.stdout

    before = node.cli_status()
    too_big = kubelet(node, "admit", str(pod_yaml(tmp_path / "nine.yaml", "nine", 9)))
    assert too_big.returncode == 1
    assert too_big.stderr.strip() == (
        "kubegpu kubelet admit: UnexpectedAdmissionError: Allocate failed due to requested number of devices "
        f"unavailable for {R}. Requested: 9, Available: 5, which is unexpected"
    )
    not_a_pod = tmp_path / "svc.yaml"
    not_a_pod.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    refused = kubelet(node, "admit", str(not_a_pod))
    assert refused.returncode == 2 and str(not_a_pod) in refused.stderr
    after = node.cli_status()
    assert after["pods"] == before["pods"]
    assert gpu(after)["allocated"] == gpu(before)["allocated"]

    # kill -9: nothing runs on the way out; the checkpoint and pod store must carry everything.
    node.stop("kubelet", signal.SIGKILL)
    registrations = gpu(before)["registrations"]
    node.start_kubelet()
    until(node, lambda s: gpu(s)["allocatable"] == 8)
    restored = node.cli_status()
    assert restored["pods"] == before["pods"]
    assert gpu(restored)["registrations"] == registrations
    assert restored["node"]["restored"]["checkpoint"] == "restored"

    again = kubelet(node, "admit", str(tmp_path / "two.yaml"), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["containers"]["main"] == options
    assert node.cli_status()["node"]["allocate_rpcs"] == 0

    deleted = kubelet(node, "delete", "ml/two")
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    assert [p["name"] for p in node.cli_status()["pods"]] == ["one"]


def test_sigterm_stops_the_emulator_cleanly_and_removes_its_sockets(node: LocalNode) -> None:
    node.start_kubelet()
    stub_plugin(node)
    until(node, lambda s: gpu(s)["allocatable"] == 8)
    assert node.pod_resources_socket.exists()
    assert node.stop("kubelet", signal.SIGTERM, timeout=30) == 0
    assert not (node.socket_dir / "kubelet.sock").exists()
    assert not client.control_socket(node.socket_dir).exists()
    assert not node.pod_resources_socket.exists()
    assert (node.socket_dir / "kubelet_internal_checkpoint").exists()
    down = kubelet(node, "status")
    assert down.returncode == 1 and "no kubegpu kubelet is running" in down.stderr


def test_the_real_device_plugin_on_a_simulated_dgx_a100(node: LocalNode, tmp_path: Path) -> None:
    node.start_kubelet()
    node.start_plugin()  # dgx-a100, its fault journal in the node's dir
    until(node, lambda s: gpu(s, "nvidia.com/gpu")["allocatable"] == 8)
    gpus = node.cli_status()["resources"]["nvidia.com/gpu"]
    uuids = [d["id"] for d in gpus["devices"]]
    assert gpus["capacity"] == 8 and all(u.startswith("GPU-") for u in uuids)

    manifest = tmp_path / "train.yaml"
    manifest.write_text(pod_yaml(tmp_path / "x.yaml", "train", 2).read_text().replace(R, "nvidia.com/gpu"))
    admitted = kubelet(node, "admit", str(manifest), "--json")
    assert admitted.returncode == 0, admitted.stderr
    visible = json.loads(admitted.stdout)["containers"]["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2 and set(visible) <= set(uuids)

    fault = node.cli(
        "fault", "xid", "--machine", "dgx-a100", "--gpu", visible[0], "--xid", "79",
        "--fault-file", str(node.fault_file),
    )  # fmt: skip
    assert fault.returncode == 0, fault.stderr
    until(node, lambda s: gpu(s, "nvidia.com/gpu")["allocatable"] == 7)
    status = node.cli_status()
    assert {d["id"]: d["health"] for d in status["resources"]["nvidia.com/gpu"]["devices"]}[visible[0]] == "Unhealthy"
    held = status["pods"][0]["containers"]["main"]["nvidia.com/gpu"]
    assert sorted(held) == sorted(visible)

    node.stop("kubelet", signal.SIGKILL)
    node.start_kubelet()
    # The plugin sees kubelet.sock created again and registers again; the allocation came from the checkpoint.
    until(node, lambda s: gpu(s, "nvidia.com/gpu")["capacity"] == 8)
    restored = node.cli_status()
    assert restored["resources"]["nvidia.com/gpu"]["allocatable"] == 7
    assert sorted(restored["pods"][0]["containers"]["main"]["nvidia.com/gpu"]) == sorted(visible)
