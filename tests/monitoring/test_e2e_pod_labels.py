"""End to end: the kubelet emulator, the device plugin and the exporter as three processes.

A pod admitted with 2 GPUs through ``kubegpu kubelet admit`` appears in the emulator's pod-resources
API; the exporter, pointed at that socket, labels exactly those 2 GPUs' series with the pod.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubegpu.gpu import profiles
from tests.monitoring import exposition
from tests.monitoring.exporter_process import ExporterProcess, scrape, wait_for

pytestmark = pytest.mark.e2e

UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: research}
spec:
  containers:
  - name: trainer
    image: cuda
    resources: {limits: {nvidia.com/gpu: 2}}
"""


def kubegpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubegpu", *args], capture_output=True, text=True, timeout=60)


class Node:
    def __init__(self, sock_dir: Path, work: Path) -> None:
        self.plugin_dir = sock_dir / "dp"
        self.pod_resources = sock_dir / "pr.sock"
        self.fault_file = work / "faults.jsonl"
        self.work = work
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.plugin_dir.mkdir()
        for name, args in (
            (
                "kubelet",
                ["kubelet", "--socket-dir", str(self.plugin_dir), "--pod-resources-socket", str(self.pod_resources)],
            ),
            (
                "plugin",
                [
                    "plugin",
                    "--machine",
                    "dgx-a100",
                    "--kubelet-socket",
                    str(self.plugin_dir / "kubelet.sock"),
                    "--fault-file",
                    str(self.fault_file),
                ],
            ),
        ):
            log = (self.work / f"{name}.log").open("ab")
            self.processes.append(subprocess.Popen([sys.executable, "-m", "kubegpu", *args], stdout=log, stderr=log))

    def allocatable(self) -> int:
        result = kubegpu("kubelet", "status", "--json", "--socket-dir", str(self.plugin_dir))
        if result.returncode != 0:
            return -1
        return int(json.loads(result.stdout).get("resources", {}).get("nvidia.com/gpu", {}).get("allocatable", -1))

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def node(sock_dir: Path, tmp_path: Path) -> Iterator[Node]:
    running = Node(sock_dir, tmp_path)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def held(base_url: str) -> dict[str, set[tuple[str, str, str]]]:
    """UUID -> (namespace, pod, container) of every labelled DCGM_FI_DEV_GPU_UTIL series."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    for s in exposition.parse(scrape(base_url)).named("DCGM_FI_DEV_GPU_UTIL"):
        if "pod" in s.labels:
            out.setdefault(s.labels["UUID"], set()).add((s.labels["namespace"], s.labels["pod"], s.labels["container"]))
    return out


def test_exactly_the_pods_two_gpus_carry_its_labels(node: Node, tmp_path: Path) -> None:
    wait_for(lambda: node.allocatable() == 8, timeout_s=30, what="8 allocatable GPUs in the emulator")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    admitted = kubegpu("kubelet", "admit", str(manifest), "--json", "--socket-dir", str(node.plugin_dir))
    assert admitted.returncode == 0, admitted.stderr
    visible = json.loads(admitted.stdout)["containers"]["trainer"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2 and set(visible) <= set(UUIDS)

    args = ["--machine", "dgx-a100", "--fault-file", str(node.fault_file), "--collect-interval", "200"]
    with ExporterProcess([*args, "--pod-resources-socket", str(node.pod_resources)]) as exporter:
        wait_for(lambda: bool(held(exporter.url)), timeout_s=20, what="pod labels on the exporter's series")
        assert held(exporter.url) == {uuid: {("research", "train", "trainer")} for uuid in visible}
        page = exposition.parse(scrape(exporter.url))
        unlabelled = {s.labels["UUID"] for s in page.named("DCGM_FI_DEV_GPU_UTIL") if "pod" not in s.labels}
        assert unlabelled == set(UUIDS) - set(visible)
        assert page.named("kubegpu_exporter_pod_resources_up")[0].value == 1

        deleted = kubegpu("kubelet", "delete", "research/train", "--socket-dir", str(node.plugin_dir))
        assert deleted.returncode == 0, deleted.stderr
        wait_for(lambda: held(exporter.url) == {}, timeout_s=20, what="pod labels gone after the pod is deleted")
