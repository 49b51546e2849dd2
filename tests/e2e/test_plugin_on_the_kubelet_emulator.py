"""End to end: ``kubegpu plugin`` and ``kubegpu kubelet`` (the emulator) as separate processes on a temp socket dir
(:class:`kubegpu.demo.localnode.LocalNode`).

Driven only through the CLIs a user has: ``kubegpu kubelet status/admit``, ``kubegpu fault``, signals.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode
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


def gpu(status: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = status.get("resources", {}).get("nvidia.com/gpu", {})
    return resource


@pytest.fixture
def node() -> Iterator[LocalNode]:
    with LocalNode(machine="dgx-a100", plugin_args=["--health-recovery-quiet-period", "0"]) as running:
        running.start_kubelet()
        running.start_plugin()
        yield running


def until(node: LocalNode, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll ``kubegpu kubelet status --json`` until ``check`` holds."""
    return node.wait_for(check, timeout=DEADLINE_S, cli=True)


def fault(node: LocalNode, *args: str) -> None:
    result = node.cli("fault", *args, "--machine", "dgx-a100", "--fault-file", str(node.fault_file))
    assert result.returncode == 0, result.stderr


def test_plugin_and_emulator_end_to_end(node: LocalNode, tmp_path: Path) -> None:
    status = until(node, lambda s: gpu(s).get("capacity") == 8 and gpu(s).get("allocatable") == 8)
    assert sorted(d["id"] for d in gpu(status)["devices"]) == sorted(UUIDS)

    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    admitted = node.cli("kubelet", "admit", str(manifest), "--json", "--socket-dir", str(node.socket_dir))
    assert admitted.returncode == 0, admitted.stderr
    envs = json.loads(admitted.stdout)["containers"]["main"]["envs"]
    visible = envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(visible) == len(set(visible)) == 2 and set(visible) <= set(UUIDS)

    # a fault on an allocated GPU: allocatable drops, the pod keeps its GPU; recovery brings it back
    index = UUIDS.index(visible[0])
    fault(node, "xid", "--gpu", str(index), "--xid", "79")
    until(node, lambda s: gpu(s).get("allocatable") == 7 and gpu(s).get("capacity") == 8)
    fault(node, "recover", "--gpu", str(index))
    until(node, lambda s: gpu(s).get("allocatable") == 8)

    # the emulator dies and comes back: the plugin registers again, the allocation is restored
    node.stop("kubelet", signal.SIGKILL)
    node.start_kubelet()
    status = until(node, lambda s: gpu(s).get("allocatable") == 8 and bool(s.get("pods")))
    (pod,) = status["pods"]
    assert (pod["namespace"], pod["name"]) == ("default", "train")
    assert pod["containers"]["main"]["nvidia.com/gpu"] == visible
    assert node.log("plugin").count("msg=registered") >= 2
