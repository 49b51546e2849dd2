"""The plugin publishes its GPUs on its Node: a real ``kubegpu plugin`` process beside the kubelet emulator,
writing to an API server (in-process, or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import faults, profiles
from kubegpu.scheduling.core import exactgpus
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = pytest.mark.live_scheduler

#: The issue's bound on how stale the published health may be after a health change.
HEALTH_WITHIN_S = 1.0


def _annotations(kube: KubeEnv, name: str) -> dict[str, str]:
    node = kube.client().get(Node, name)
    return dict((node.metadata.annotations if node.metadata else None) or {})


def _description(kube: KubeEnv, name: str) -> dict[str, Any] | None:
    text = _annotations(kube, name).get("kubegpu.io/gpus")
    return None if text is None else dict(json.loads(text))


@pytest.fixture
def published(kube: KubeEnv) -> Iterator[tuple[LocalNode, str]]:
    name = kube.name("gpu-node")
    kube.client().create(Node(metadata=ObjectMeta(name=name, labels={"kubernetes.io/hostname": name})))
    node = LocalNode(
        "dgx-a100",
        plugin_args=["--node-name", name, "--kubeconfig", str(kube.kubeconfig), "--health-recovery-quiet-period", "0"],
    )
    with node:
        node.start_kubelet()
        node.start_plugin()
        yield node, name


def test_the_node_carries_its_dgx_a100_gpus_links_and_plain_id_list(published: tuple[LocalNode, str], kube: KubeEnv):
    _, name = published
    machine = profiles.load("dgx-a100")
    described = wait_until(lambda: _description(kube, name), within=30, what="kubegpu.io/gpus on the Node")
    assert described["version"] == "v1"
    assert [(g["index"], g["uuid"], g["id"], g["numa"], g["health"]) for g in described["gpus"]] == [
        (g.index, g.uuid, g.uuid, g.numa_node, "Healthy") for g in machine.gpus
    ]
    assert {g["model"] for g in described["gpus"]} == {machine.gpus[0].product_name}
    assert profiles.topology_from_dict(described["topology"]) == machine.topology
    assert described["links"][0][1].startswith("NV")  # NVSwitch fabric between every pair
    assert _annotations(kube, name)["kubegpu.io/gpu-devices"] == ",".join(g.uuid for g in machine.gpus)


def test_an_xid_marks_the_gpu_unhealthy_on_the_node_within_a_second(published: tuple[LocalNode, str], kube: KubeEnv):
    node, name = published
    wait_until(lambda: _description(kube, name), within=30, what="kubegpu.io/gpus on the Node")
    node.wait_for(lambda s: bool(s.get("resources")), timeout=30)  # the plugin is serving: its monitor runs
    injected = time.monotonic()
    node.inject(faults.Fault(kind="xid", gpu=3, xid=79))

    def gpu3_unhealthy() -> bool:
        described = _description(kube, name)
        return described is not None and described["gpus"][3]["health"] == "Unhealthy"

    wait_until(gpu3_unhealthy, within=HEALTH_WITHIN_S, what="GPU 3 Unhealthy on the Node")
    took = time.monotonic() - injected
    assert took <= HEALTH_WITHIN_S
    described = _description(kube, name)
    assert described is not None
    assert [g["index"] for g in described["gpus"] if g["health"] == "Unhealthy"] == [3]
    # The scheduler's reader stops choosing it.
    published = exactgpus.read(name, _annotations(kube, name)["kubegpu.io/gpus"])
    assert exactgpus.choose(published, set(), 8) is None
    choice = exactgpus.choose(published, set(), 7)
    assert choice is not None and 3 not in choice.indices
    node.inject(faults.Fault(kind="recover", gpu=3))
    wait_until(lambda: not gpu3_unhealthy(), within=HEALTH_WITHIN_S, what="GPU 3 Healthy again on the Node")


def test_without_a_node_name_nothing_is_written(kube: KubeEnv) -> None:
    name = kube.name("plain-node")
    kube.client().create(Node(metadata=ObjectMeta(name=name)))
    with LocalNode("pcie-4xt4") as node:
        node.start_kubelet()
        node.start_plugin()
        node.wait_for(lambda s: bool(s.get("resources")), timeout=30)
        assert "publishing the GPUs" not in node.log("plugin")
    assert "kubegpu.io/gpus" not in _annotations(kube, name)


def test_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path: Any) -> None:
    with LocalNode("pcie-4xt4") as node:
        done = node.cli("plugin", "--machine", "pcie-4xt4", "--node-name", "n1", "--kubeconfig", str(tmp_path / "no"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"kubegpu plugin: error: --node-name n1: --kubeconfig {tmp_path / 'no'}: no such file"
    ]


def test_a_node_registered_after_the_plugin_started_gets_the_description(kube: KubeEnv) -> None:
    name = kube.name("late-node")
    node = LocalNode("pcie-4xt4", plugin_args=["--node-name", name, "--kubeconfig", str(kube.kubeconfig)])
    with node:
        node.start_kubelet()
        node.start_plugin()
        node.wait_log("plugin", "cannot write the node annotations")
        kube.client().create(Node(metadata=ObjectMeta(name=name)))
        described = wait_until(lambda: _description(kube, name), within=30, what="kubegpu.io/gpus on the late Node")
        assert len(described["gpus"]) == 4
        assert node.running("plugin")
        assert node.log("plugin").count("cannot write the node annotations") == 1  # logged once, retried quietly
