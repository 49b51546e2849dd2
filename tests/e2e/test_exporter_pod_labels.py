"""End to end: the kubelet emulator, the device plugin and the exporter as three processes
(:class:`kubegpu.demo.localnode.LocalNode`).

A pod admitted with 2 GPUs through ``kubegpu kubelet admit`` appears in the emulator's pod-resources
API; the exporter, pointed at that socket, labels exactly those 2 GPUs' series with the pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import profiles
from tests.monitoring import exposition
from tests.monitoring.exporter_process import scrape
from tests.polling import wait_until

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


@pytest.fixture
def node() -> Iterator[LocalNode]:
    with LocalNode(machine="dgx-a100") as running:
        running.start_kubelet()
        running.start_plugin()
        yield running


def allocatable(status: dict[str, Any]) -> int:
    return int(status.get("resources", {}).get("nvidia.com/gpu", {}).get("allocatable", -1))


def held(base_url: str) -> dict[str, set[tuple[str, str, str]]]:
    """UUID -> (namespace, pod, container) of every labelled DCGM_FI_DEV_GPU_UTIL series."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    for s in exposition.parse(scrape(base_url)).named("DCGM_FI_DEV_GPU_UTIL"):
        if "pod" in s.labels:
            out.setdefault(s.labels["UUID"], set()).add((s.labels["namespace"], s.labels["pod"], s.labels["container"]))
    return out


def test_exactly_the_pods_two_gpus_carry_its_labels(node: LocalNode, tmp_path: Path) -> None:
    node.wait_for(lambda s: allocatable(s) == 8, timeout=30, cli=True)  # as `kubegpu kubelet status` prints it
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    admitted = node.cli("kubelet", "admit", str(manifest), "--json", "--socket-dir", str(node.socket_dir))
    assert admitted.returncode == 0, admitted.stderr
    visible = json.loads(admitted.stdout)["containers"]["trainer"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(visible)) == 2 and set(visible) <= set(UUIDS)

    node.start_exporter(collect_interval_ms=200)
    exporter = f"http://127.0.0.1:{node.exporter_port}"
    wait_until(lambda: bool(held(exporter)), within=20, what="pod labels on the exporter's series")
    assert held(exporter) == {uuid: {("research", "train", "trainer")} for uuid in visible}
    page = exposition.parse(scrape(exporter))
    unlabelled = {s.labels["UUID"] for s in page.named("DCGM_FI_DEV_GPU_UTIL") if "pod" not in s.labels}
    assert unlabelled == set(UUIDS) - set(visible)
    assert page.named("kubegpu_exporter_pod_resources_up")[0].value == 1

    deleted = node.cli("kubelet", "delete", "research/train", "--socket-dir", str(node.socket_dir))
    assert deleted.returncode == 0, deleted.stderr
    wait_until(lambda: held(exporter) == {}, within=20, what="pod labels gone after the pod is deleted")
