"""End to end: ``kubegpu plugin`` and ``kubegpu kubelet`` (the emulator) as separate processes on a temp socket dir.

Driven only through the CLIs a user has: ``kubegpu kubelet status/admit``, ``kubegpu fault``, signals.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.gpu import profiles

pytestmark = pytest.mark.e2e

DEADLINE_S = 30.0
UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default}
spec:
  containers:
  - name: main
    image: cuda
    resources: {limits: {nvidia.com/gpu: 2}}
"""


def kubegpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", *args], capture_output=True, text=True, timeout=60, check=False
    )


class Node:
    """The emulator and the plugin as processes; logs and the fault journal outside the socket dir it cleans."""

    def __init__(self, sock_dir: Path, work: Path) -> None:
        self.sock_dir = sock_dir
        self.work = work
        self.fault_file = work / "faults.jsonl"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        args = {
            "kubelet": ["kubelet", "--socket-dir", str(self.sock_dir), "--no-pod-resources"],
            "plugin": [
                "plugin",
                "--machine",
                "dgx-a100",
                "--kubelet-socket",
                str(self.sock_dir / "kubelet.sock"),
                "--fault-file",
                str(self.fault_file),
                "--health-recovery-quiet-period",
                "0",
            ],
        }[name]
        log = (self.work / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen([sys.executable, "-m", "kubegpu", *args], stdout=log, stderr=log)

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        process.kill()
        process.wait(DEADLINE_S)

    def fault(self, *args: str) -> None:
        result = kubegpu("fault", *args, "--machine", "dgx-a100", "--fault-file", str(self.fault_file))
        assert result.returncode == 0, result.stderr

    def status(self) -> dict[str, Any]:
        result = kubegpu("kubelet", "status", "--json", "--socket-dir", str(self.sock_dir))
        return json.loads(result.stdout) if result.returncode == 0 else {}

    def until(self, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            status = self.status()
            if status and check(status):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"node never reached the expected state; last status: {status}")
            time.sleep(0.2)

    def stop(self) -> None:
        for name in list(self.processes):
            process = self.processes.pop(name)
            process.terminate()
            try:
                process.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def gpu(status: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = status.get("resources", {}).get("nvidia.com/gpu", {})
    return resource


@pytest.fixture
def node(sock_dir: Path, tmp_path: Path) -> Iterator[Node]:
    running = Node(sock_dir, tmp_path)
    running.start("kubelet")
    running.start("plugin")
    try:
        yield running
    finally:
        running.stop()


def test_plugin_and_emulator_end_to_end(node: Node, tmp_path: Path) -> None:
    status = node.until(lambda s: gpu(s).get("capacity") == 8 and gpu(s).get("allocatable") == 8)
    assert sorted(d["id"] for d in gpu(status)["devices"]) == sorted(UUIDS)

    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    admitted = kubegpu("kubelet", "admit", str(manifest), "--json", "--socket-dir", str(node.sock_dir))
    assert admitted.returncode == 0, admitted.stderr
    envs = json.loads(admitted.stdout)["containers"]["main"]["envs"]
    visible = envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(visible) == len(set(visible)) == 2 and set(visible) <= set(UUIDS)

    # a fault on an allocated GPU: allocatable drops, the pod keeps its GPU; recovery brings it back
    index = UUIDS.index(visible[0])
    node.fault("xid", "--gpu", str(index), "--xid", "79")
    node.until(lambda s: gpu(s).get("allocatable") == 7 and gpu(s).get("capacity") == 8)
    node.fault("recover", "--gpu", str(index))
    node.until(lambda s: gpu(s).get("allocatable") == 8)

    # the emulator dies and comes back: the plugin registers again, the allocation is restored
    node.kill("kubelet")
    node.start("kubelet")
    status = node.until(lambda s: gpu(s).get("allocatable") == 8 and bool(s.get("pods")))
    (pod,) = status["pods"]
    assert (pod["namespace"], pod["name"]) == ("default", "train")
    assert pod["containers"]["main"]["nvidia.com/gpu"] == visible
    plugin_log = (tmp_path / "plugin.log").read_text()
    assert plugin_log.count("msg=registered") >= 2
