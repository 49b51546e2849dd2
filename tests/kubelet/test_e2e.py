"""End to end: ``kubegpu kubelet`` and a stub plugin as separate processes, driven through the CLI.

Covers what a plugin author does: start the emulator, watch the plugin register,
admit and delete pods with ``kubegpu kubelet``, survive ``kill -9`` of the
emulator (checkpoint restore, re-registration, no new Allocate), stop cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


class Node:
    def __init__(self, socket_dir: Path) -> None:
        self.socket_dir = socket_dir
        self.env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, *argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def emulator(self) -> subprocess.Popen[bytes]:
        proc = self.spawn(sys.executable, "-m", "kubegpu", "kubelet", "--socket-dir", str(self.socket_dir))
        self.until(lambda: _pings(self.socket_dir) or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        return proc

    def plugin(self) -> subprocess.Popen[bytes]:
        return self.spawn(
            sys.executable,
            "-m",
            "tests.kubelet.stubplugin",
            "--socket-dir",
            str(self.socket_dir),
            "--devices",
            "8",
            "--numa-nodes",
            "2",
        )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kubegpu", "kubelet", *args, "--socket-dir", str(self.socket_dir)],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def status(self) -> dict[str, Any]:
        done = self.cli("status", "--json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def quick_status(self) -> dict[str, Any]:
        """Status through the Python client (no process start): for polling."""
        try:
            return client.status(self.socket_dir, timeout=10)
        except Exception:
            return {"resources": {}, "pods": []}

    @staticmethod
    def until(check: Callable[[], object], within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not check():
            assert time.monotonic() < deadline, "condition not met in time"
            time.sleep(0.05)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def _pings(socket_dir: Path) -> bool:
    try:
        client.ping(socket_dir, timeout=1)
    except Exception:
        return False
    return True


@pytest.fixture
def node(sock_dir: Path) -> Iterator[Node]:
    n = Node(sock_dir / "device-plugins")
    try:
        yield n
    finally:
        n.cleanup()


def gpu(status: dict[str, Any], name: str = R) -> dict[str, Any]:
    """One resource of a status (zeros when the node does not report it)."""
    resources: dict[str, Any] = status["resources"]
    return resources.get(name, {"capacity": 0, "allocatable": 0, "registrations": 0})


def test_a_plugin_registers_pods_are_admitted_and_kill_9_loses_nothing(node: Node, tmp_path: Path) -> None:
    emulator = node.emulator()
    node.plugin()
    node.until(lambda: gpu(node.quick_status())["allocatable"] == 8)
    status = node.status()
    assert gpu(status)["capacity"] == 8
    assert [d["numa"] for d in gpu(status)["devices"]] == [[0]] * 4 + [[1]] * 4

    admitted = node.cli("admit", str(pod_yaml(tmp_path / "two.yaml", "two", 2)), "--json")
    assert admitted.returncode == 0, admitted.stderr
    options = json.loads(admitted.stdout)["containers"]["main"]
    visible = options["envs"]["STUB_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2
    assert {"envs", "mounts", "devices", "annotations", "cdi_devices"} <= set(options)

    table = node.cli("admit", str(pod_yaml(tmp_path / "one.yaml", "one", 1)))
    assert table.returncode == 0 and "pod ml/one" in table.stdout and "STUB_VISIBLE_DEVICES" in table.stdout

    before = node.status()
    too_big = node.cli("admit", str(pod_yaml(tmp_path / "nine.yaml", "nine", 9)))
    assert too_big.returncode == 1
    assert too_big.stderr.strip() == (
        "kubegpu kubelet admit: UnexpectedAdmissionError: Allocate failed due to requested number of devices "
        f"unavailable for {R}. Requested: 9, Available: 5, which is unexpected"
    )
    not_a_pod = tmp_path / "svc.yaml"
    not_a_pod.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    refused = node.cli("admit", str(not_a_pod))
    assert refused.returncode == 2 and str(not_a_pod) in refused.stderr
    after = node.status()
    assert after["pods"] == before["pods"]
    assert gpu(after)["allocated"] == gpu(before)["allocated"]

    # kill -9: nothing runs on the way out; the checkpoint and pod store must carry everything.
    emulator.send_signal(signal.SIGKILL)
    emulator.wait(timeout=10)
    registrations = gpu(before)["registrations"]
    node.emulator()
    node.until(lambda: gpu(node.quick_status())["allocatable"] == 8)
    restored = node.status()
    assert restored["pods"] == before["pods"]
    assert gpu(restored)["registrations"] == registrations
    assert restored["node"]["restored"]["checkpoint"] == "restored"

    again = node.cli("admit", str(tmp_path / "two.yaml"), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["containers"]["main"] == options
    assert node.status()["node"]["allocate_rpcs"] == 0

    deleted = node.cli("delete", "ml/two")
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    assert [p["name"] for p in node.status()["pods"]] == ["one"]


def test_sigterm_stops_the_emulator_cleanly_and_removes_its_sockets(node: Node) -> None:
    emulator = node.emulator()
    node.plugin()
    node.until(lambda: gpu(node.quick_status())["allocatable"] == 8)
    emulator.send_signal(signal.SIGTERM)
    assert emulator.wait(timeout=30) == 0
    assert not (node.socket_dir / "kubelet.sock").exists()
    assert not client.control_socket(node.socket_dir).exists()
    assert not (node.socket_dir.parent / "pod-resources" / "kubelet.sock").exists()
    assert (node.socket_dir / "kubelet_internal_checkpoint").exists()
    down = node.cli("status")
    assert down.returncode == 1 and "no kubegpu kubelet is running" in down.stderr


def test_the_real_device_plugin_on_a_simulated_dgx_a100(node: Node, tmp_path: Path) -> None:
    faults = tmp_path / "faults.jsonl"
    emulator = node.emulator()
    node.spawn(
        sys.executable, "-m", "kubegpu", "plugin", "--machine", "dgx-a100",
        "--kubelet-socket", str(node.socket_dir / "kubelet.sock"), "--fault-file", str(faults),
    )  # fmt: skip
    node.until(lambda: gpu(node.quick_status(), "nvidia.com/gpu")["allocatable"] == 8)
    gpus = node.status()["resources"]["nvidia.com/gpu"]
    uuids = [d["id"] for d in gpus["devices"]]
    assert gpus["capacity"] == 8 and all(u.startswith("GPU-") for u in uuids)

    manifest = tmp_path / "train.yaml"
    manifest.write_text(pod_yaml(tmp_path / "x.yaml", "train", 2).read_text().replace(R, "nvidia.com/gpu"))
    admitted = node.cli("admit", str(manifest), "--json")
    assert admitted.returncode == 0, admitted.stderr
    visible = json.loads(admitted.stdout)["containers"]["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2 and set(visible) <= set(uuids)

    fault = subprocess.run(
        [sys.executable, "-m", "kubegpu", "fault", "xid", "--machine", "dgx-a100", "--gpu", visible[0], "--xid", "79",
         "--fault-file", str(faults)],
        cwd=REPO, env=node.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert fault.returncode == 0, fault.stderr
    node.until(lambda: gpu(node.quick_status(), "nvidia.com/gpu")["allocatable"] == 7)
    status = node.status()
    assert {d["id"]: d["health"] for d in status["resources"]["nvidia.com/gpu"]["devices"]}[visible[0]] == "Unhealthy"
    held = status["pods"][0]["containers"]["main"]["nvidia.com/gpu"]
    assert sorted(held) == sorted(visible)

    emulator.send_signal(signal.SIGKILL)
    emulator.wait(timeout=10)
    node.emulator()
    # The plugin sees kubelet.sock created again and registers again; the allocation came from the checkpoint.
    node.until(lambda: gpu(node.quick_status(), "nvidia.com/gpu")["capacity"] == 8)
    restored = node.status()
    assert restored["resources"]["nvidia.com/gpu"]["allocatable"] == 7
    assert sorted(restored["pods"][0]["containers"]["main"]["nvidia.com/gpu"]) == sorted(visible)
