"""Property: whatever happens on the nodes, every container gets exactly the GPUs the scheduler chose for it.

Hypothesis draws short sequences of steps — a pod bound through ``kubegpu scheduler`` (whole GPUs, or a share of one
GPU: each node lends GPU 3 in ``kubegpu.io/gpu-milli`` units), a pod deleted, a node's
plugin restarted, a node's agent (the emulated kubelet) restarted, an XID or a recovery on one GPU (through the
machine's fault journal, as ``kubegpu fault`` writes it) — and runs them on two emulated nodes of real processes
publishing their GPUs, on the in-process API server (or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names). After
every step the cluster is let settle (every pod Running, or Pending with the scheduler's reason while no node has
room for it; deleted pods gone from the API and from the nodes; each node's allocatable equal to the healthy GPUs
it publishes) and then:

- every Running pod's container sees (``NVIDIA_VISIBLE_DEVICES``) and its node holds exactly the devices in its
  ``kubegpu.io/gpu-devices``; a fractional pod's container sees its one GPU and its share, and its node holds
  exactly that many units, all of that GPU;
- no device (whole GPU or milli unit) is held by two pods, so no GPU share is ever over-committed;
- nothing is lost: no pod Failed, none bound and stuck, none Pending while a node has room for it.

A step is a small frozen value (:class:`Bind`, :class:`Share`, :class:`Delete`, :class:`Restart`,
:class:`Health`) and the driver applies it. Kept small for CI: four examples of up to ten steps, derandomised (the
same sequences every run; ``KUBEGPU_PROPERTY_RANDOM=1`` draws new ones).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube import ApiError
from lightkube.resources.core_v1 import Pod

from kubegpu.gpu import faults
from kubegpu.scheduling.core import exactgpus
from tests.e2e.gpucluster import GPU, GPU_MILLI, RUNTIME_OPTIONS, GpuCluster, GpuNode, running_pod
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

#: Two nodes of different shapes: 4 PCIe GPUs (contention comes quickly) and an NVSwitch dgx-a100.
MACHINES = ("pcie-4xt4", "dgx-a100")
#: An XID that marks the GPU Unhealthy until a ``recover`` event (not ignored, not "GPU lost").
XID = 74
SETTLE_S = 45.0
#: The GPU every node lends in shares (``--gpu-milli``); the others are whole GPUs.
SHARED_GPU = 3
UNITS = 1000


@dataclass(frozen=True)
class Bind:
    """Create a pod asking ``gpus`` whole GPUs; the scheduler places it (or it stays Pending)."""

    gpus: int

    def apply(self, driver: Driver) -> None:
        driver.seq += 1
        driver.cluster.create(f"p{driver.seq}", self.gpus)


@dataclass(frozen=True)
class Share:
    """Create a pod asking ``milli`` of one GPU; the scheduler gives it a shared GPU (or it stays Pending)."""

    milli: int

    def apply(self, driver: Driver) -> None:
        driver.seq += 1
        driver.cluster.create(f"s{driver.seq}", 0, milli=self.milli)


@dataclass(frozen=True)
class Delete:
    """Delete the ``which``-th (modulo) of the test's pods, by name order; nothing when there is none."""

    which: int

    def apply(self, driver: Driver) -> None:
        names = sorted(driver.pods())
        if names:
            name = names[self.which % len(names)]
            driver.kube.client().delete(Pod, name)
            driver.deleted.add(name)


@dataclass(frozen=True)
class Restart:
    """Restart node ``node``'s (index, modulo) plugin or agent."""

    node: int
    what: str  # "plugin" or "agent"

    def apply(self, driver: Driver) -> None:
        node = driver.node(self.node)
        if self.what == "plugin":
            node.restart_plugin()
        else:
            node.restart_agent()


@dataclass(frozen=True)
class Health:
    """An XID (``recover=False``) or a recovery on GPU ``gpu`` (modulo the node's count) of node ``node``."""

    node: int
    gpu: int
    recover: bool

    def apply(self, driver: Driver) -> None:
        node = driver.node(self.node)
        gpu = self.gpu % len(node.machine.gpus)
        if self.recover:
            node.local.inject(faults.Fault(kind="recover", gpu=gpu))
        else:
            node.local.inject(faults.Fault(kind="xid", gpu=gpu, xid=XID))
        driver.faulted.add((node.name, gpu))


Step = Bind | Share | Delete | Restart | Health

binds = st.builds(Bind, st.sampled_from([1, 2, 3, 4]))
steps = st.one_of(
    binds,
    binds,  # twice as likely as the other kinds: the cluster fills up and GPUs are contended
    st.builds(Share, st.sampled_from([300, 500, 700])),
    st.builds(Delete, st.integers(0, 7)),
    st.builds(Restart, st.integers(0, 1), st.sampled_from(["plugin", "agent"])),
    st.builds(Health, st.integers(0, 1), st.integers(0, 7), st.booleans()),
)


class Driver:
    """Applies steps to the cluster, waits for it to settle and checks the invariants."""

    def __init__(self, kube: KubeEnv, cluster: GpuCluster) -> None:
        self.kube, self.cluster = kube, cluster
        self.seq = 0
        self.deleted: set[str] = set()
        self.faulted: set[tuple[str, int]] = set()

    def node(self, i: int) -> GpuNode:
        return list(self.cluster.nodes.values())[i % len(self.cluster.nodes)]

    def pods(self) -> dict[str, Pod]:
        listed = self.kube.client().list(Pod, namespace=self.kube.namespace)
        return {str(p.metadata.name): p for p in listed if p.metadata and not p.metadata.deletionTimestamp}

    # ----- between examples ---------------------------------------------------------------------

    def reset(self) -> None:
        """No pods, every GPU healthy, every node Ready: each example starts from the same cluster."""
        client = self.kube.client()
        for name in self.pods():
            try:
                client.delete(Pod, name)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
        for node_name, gpu in sorted(self.faulted):
            self.cluster.nodes[node_name].local.inject(faults.Fault(kind="recover", gpu=gpu))
        self.faulted.clear()
        nodes = self.cluster.nodes.values()
        wait_until(
            lambda: not self._listed() and not any(n.held(self.kube.namespace) for n in nodes),
            within=SETTLE_S,
            what="no pods left",
        )
        self.cluster.wait_ready(within=SETTLE_S)
        self.deleted.clear()

    def _listed(self) -> list[str]:
        return [str(p.metadata.name) for p in self.kube.client().list(Pod, namespace=self.kube.namespace) if p.metadata]

    # ----- settling -----------------------------------------------------------------------------

    def unsettled(self) -> str:
        """Why the cluster has not settled yet ("" when it has)."""
        listed = {str(p.metadata.name): p for p in self.kube.client().list(Pod, namespace=self.kube.namespace)
                  if p.metadata}  # fmt: skip
        for name in sorted(self.deleted & set(listed)):
            return f"deleted pod {name} still in the API"
        held = {node.name: node.held(self.kube.namespace) for node in self.cluster.nodes.values()}
        for node_name, pods in held.items():
            for name in pods:
                pod = listed.get(name)
                if pod is None or pod.spec is None or pod.spec.nodeName != node_name:
                    return f"node {node_name} still holds GPUs for pod {name}"
        free = self._free_healthy(held)
        left = self._share_left(held)
        for node_name in free:
            published = self.cluster.published(node_name)
            healthy = sum(h for h, shared in zip(published.healthy, _shared(published), strict=True) if not shared)
            if not self.cluster.ready(node_name, healthy):
                return f"node {node_name} not Ready with its {healthy} healthy whole GPUs allocatable"
            units = UNITS * sum(h for h, shared in zip(published.healthy, _shared(published), strict=True) if shared)
            got = self.cluster.node_object(node_name)
            allocatable = (got.status.allocatable if got and got.status else None) or {}
            if allocatable.get(GPU_MILLI, "0") != str(units):
                return f"node {node_name}: {GPU_MILLI} allocatable {allocatable.get(GPU_MILLI)}, not {units}"
        for name, pod in sorted(listed.items()):
            assert pod.spec is not None
            phase = pod.status.phase if pod.status else None
            if phase == "Running":
                if pod.spec.nodeName and name not in held.get(pod.spec.nodeName, {}):
                    return f"pod {name} Running but node {pod.spec.nodeName} holds nothing for it"
                continue
            if phase != "Pending":
                return f"LOST: pod {name} is {phase}: {_conditions(pod)}"
            if pod.spec.nodeName:
                return f"pod {name} bound to {pod.spec.nodeName}, not Running yet"
            conditions = (pod.status.conditions if pod.status else None) or []
            if not any(c.type == "PodScheduled" and c.status == "False" and c.message for c in conditions):
                return f"pod {name} Pending without the scheduler's reason"
            share = _milli(pod)
            if share:
                roomy = [n for n, gpus in left.items() if any(units >= share for units in gpus.values())]
                if roomy:
                    return f"pod {name} (asks {share} milli) Pending while {roomy} have a GPU with that left"
                continue
            want = _gpus(pod)
            roomy = [n for n, count in free.items() if count >= want]
            if roomy:
                return f"pod {name} (asks {want}) Pending while {roomy} have room"
        return ""

    def _free_healthy(self, held: dict[str, dict[str, dict[str, list[str]]]]) -> dict[str, int]:
        """Per node: GPUs published healthy and held by no pod."""
        out: dict[str, int] = {}
        for node_name in self.cluster.nodes:
            published = self.cluster.published(node_name)
            used = {d for pod in held[node_name].values() for devices in pod.values() for d in devices}
            out[node_name] = len(published.free(used))
        return out

    def _share_left(self, held: dict[str, dict[str, dict[str, list[str]]]]) -> dict[str, dict[str, int]]:
        """Per node: units left per healthy GPU lent in shares (by UUID)."""
        out: dict[str, dict[str, int]] = {}
        for node_name in self.cluster.nodes:
            published = self.cluster.published(node_name)
            units = [_unit_gpu(d) for pod in held[node_name].values() for devices in pod.values() for d in devices]
            out[node_name] = {
                uuid: UNITS - units.count(uuid)
                for uuid, healthy, shared in zip(published.uuids, published.healthy, _shared(published), strict=True)
                if shared and healthy
            }
        return out

    def settle(self, after: str) -> None:
        last: list[str] = []

        def settled() -> bool:
            last[:] = [self.unsettled()]
            if last[0].startswith("LOST"):
                raise AssertionError(f"after {after}: {last[0]}\n{self.cluster.logs()}")
            return not last[0]

        try:
            wait_until(settled, within=SETTLE_S, what=f"cluster settled after {after}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {last[0] if last else ''}\n{self.cluster.logs()}") from None

    # ----- the invariants -----------------------------------------------------------------------

    def check(self, after: str) -> None:
        held_by: dict[tuple[str, str], str] = {}
        for node in self.cluster.nodes.values():
            held = node.held(self.kube.namespace)
            for pod_name, containers in held.items():
                for devices in containers.values():
                    for device in devices:
                        other = held_by.setdefault((node.name, device), pod_name)
                        assert other == pod_name, (
                            f"after {after}: {device} on {node.name} held by {other} and {pod_name}"
                        )
            published = self.cluster.published(node.name)
            shared_gpus = {u for u, shared in zip(published.uuids, _shared(published), strict=True) if shared}
            for pod_name in held:
                pod = self.cluster.running(pod_name)
                assert pod is not None, f"after {after}: {node.name} holds GPUs for {pod_name}, which is not Running"
                got = running_pod(pod)
                assert got.node == node.name
                share = _milli(pod)
                if share:
                    units = held[pod_name]["main"]
                    assert len(got.chosen) == 1 and got.chosen[0] in shared_gpus, f"after {after}: {pod_name} {got}"
                    assert got.main == got.chosen, f"after {after}: {pod_name} sees {got.main}"
                    assert len(units) == share, f"after {after}: {pod_name} holds {len(units)} units, asked {share}"
                    assert {_unit_gpu(u) for u in units} == set(got.chosen), f"after {after}: {pod_name} {units}"
                    envs = json.loads((pod.metadata.annotations or {})[RUNTIME_OPTIONS])["main"]["envs"]  # type: ignore[union-attr]
                    assert envs.get("KUBEGPU_GPU_MILLI") == str(share), f"after {after}: {pod_name} envs {envs}"
                    continue
                assert len(got.chosen) == _gpus(pod), f"after {after}: {pod_name} chose {got.chosen}"
                assert sorted(got.main) == sorted(got.chosen), f"after {after}: {pod_name} sees {got.main}"
                assert sorted(held[pod_name]["main"]) == sorted(got.chosen), f"after {after}: {pod_name} holds {held}"


def _gpus(pod: Pod) -> int:
    assert pod.spec is not None
    return sum(int((c.resources.limits or {}).get(GPU, 0)) for c in pod.spec.containers if c.resources)


def _milli(pod: Pod) -> int:
    assert pod.spec is not None
    return sum(int((c.resources.limits or {}).get(GPU_MILLI, 0)) for c in pod.spec.containers if c.resources)


def _unit_gpu(device: str) -> str:
    """The GPU (UUID) a ``kubegpu.io/gpu-milli`` unit ``<uuid>::m<k>`` belongs to; "" for a whole GPU's ID."""
    gpu, sep, _ = device.partition("::m")
    return gpu if sep else ""


def _shared(published: exactgpus.NodeGpus) -> tuple[bool, ...]:
    return published.milli or (False,) * len(published.healthy)


def _conditions(pod: Pod) -> str:
    conditions = (pod.status.conditions if pod.status else None) or []
    return "; ".join(f"{c.type}={c.status} {c.reason or ''} {c.message or ''}" for c in conditions)


@pytest.fixture
def driver(kube: KubeEnv, tmp_path: Path) -> Iterator[Driver]:
    with GpuCluster(kube, tmp_path, MACHINES, plugin_args=("--gpu-milli", str(SHARED_GPU))) as cluster:
        cluster.wait_ready()
        yield Driver(kube, cluster)


@settings(
    max_examples=4,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("KUBEGPU_PROPERTY_RANDOM"),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=st.lists(steps, min_size=4, max_size=10))
def test_every_container_gets_the_gpus_the_scheduler_chose_whatever_the_nodes_do(
    driver: Driver, sequence: list[Step]
) -> None:
    driver.reset()
    for number, step in enumerate(sequence, 1):
        step.apply(driver)
        after = f"step {number} {step} of {sequence}"
        driver.settle(after)
        driver.check(after)
