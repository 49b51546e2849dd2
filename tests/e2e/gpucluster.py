"""A small GPU cluster of real processes on the test's API server: emulated nodes and ``kubegpu scheduler``.

Owns starting and stopping the pieces the scheduler-to-container tests share: per node a ``kubegpu kubelet``
node agent (``--node-name``, this test's node label) and a ``kubegpu plugin`` (publishing its GPUs with
``--node-name`` unless told not to), one ``kubegpu scheduler`` with a profile named for the test, restarting a
node's plugin or agent, waiting for nodes to be Ready, making this test's pods and reading what their
containers got. The profile and the node label are the test's own, so on a real cluster
(``KUBEGPU_TEST_KUBECONFIG``) no other scheduler takes the pods and they stay off real nodes. Must not assert
properties of its own: the tests decide what must hold.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from kubegpu.demo.localnode import LocalNode, free_port
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine
from kubegpu.scheduling.core import exactgpus
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

GPU = "nvidia.com/gpu"
#: The resource of GPUs a plugin lends in shares (``--gpu-milli``): one device per milli-GPU.
GPU_MILLI = exactgpus.MILLI_RESOURCE
#: The node label each test's nodes carry (value: the test's namespace) and its pods select.
POOL = "kubegpu.io/test-pool"
#: The pod annotation the scheduler writes its chosen devices in, and the agent's runtime options annotation.
PICK = "kubegpu.io/gpu-devices"
RUNTIME_OPTIONS = "kubegpu.io/runtime-options"
NOT_READY = "node.kubernetes.io/not-ready"


def scheduler_config(profile: str, score: Sequence[dict[str, Any]] = (), plugin_config: Sequence[Any] = ()) -> str:
    """A KubeSchedulerConfiguration with one profile, leader election off, extra score plugins and their args."""
    entry: dict[str, Any] = {"schedulerName": profile}
    if score:
        entry["plugins"] = {"score": {"enabled": list(score)}}
    if plugin_config:
        entry["pluginConfig"] = list(plugin_config)
    return yaml.safe_dump(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [entry],
        }
    )


@dataclass
class GpuNode:
    """One emulated node: its Node name, machine profile and processes."""

    name: str
    machine: Machine
    local: LocalNode

    def restart_plugin(self) -> None:
        """Stop the plugin (SIGTERM) and start it again; it re-registers and re-publishes on its own."""
        self.local.stop("plugin")
        self.local.start_plugin()

    def restart_agent(self) -> None:
        """Stop the node agent (the emulator process) and start it again; it restores its checkpoint."""
        self.local.stop("kubelet")
        self.local.start_kubelet()

    def held(self, namespace: str) -> dict[str, dict[str, list[str]]]:
        """What the node's kubelet holds for the namespace's pods: pod name -> container -> GPU device IDs (whole
        GPUs' and ``kubegpu.io/gpu-milli`` units alike)."""
        out: dict[str, dict[str, list[str]]] = {}
        for pod in self.local.status()["pods"]:
            if pod["namespace"] == namespace:
                out[pod["name"]] = {c: [*r.get(GPU, []), *r.get(GPU_MILLI, [])] for c, r in pod["containers"].items()}
        return out

    def uuid_index(self) -> dict[str, int]:
        return {g.uuid: g.index for g in self.machine.gpus}


@dataclass
class GpuCluster:
    """Nodes (``machines``, one per entry) and a scheduler on ``kube``; a context manager that leaves nothing.

    Parameters:
        kube: the test's API server.
        root: where the scheduler's config and log go (the test's ``tmp_path``).
        machines: one simulated machine profile per node; nodes are named ``gpu-a``, ``gpu-b`` … (prefixed).
        publish: start the plugins with ``--node-name`` (the node publishes its GPUs, honours picks).
        score, plugin_config: extra score plugins and plugin args of the profile.
        plugin_args: extra arguments of every plugin.
        agent_args: extra arguments of each node's agent, one list per machine (e.g. its ``--capacity``).
    """

    kube: KubeEnv
    root: Path
    machines: Sequence[str] = ("dgx-a100",)
    publish: bool = True
    score: Sequence[dict[str, Any]] = ()
    plugin_config: Sequence[Any] = ()
    plugin_args: Sequence[str] = ()
    agent_args: Sequence[Sequence[str]] = ()
    nodes: dict[str, GpuNode] = field(default_factory=dict)
    profile: str = ""
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _host: LocalNode | None = None
    _metrics_port: int = 0

    def __enter__(self) -> GpuCluster:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _start(self) -> None:
        self.profile = self.kube.name("gpu-scheduler")
        config = self.root / "scheduler.yaml"
        config.write_text(scheduler_config(self.profile, self.score, self.plugin_config))
        kubeconfig = str(self.kube.kubeconfig)
        for i, machine in enumerate(self.machines):
            name = self.kube.name(f"gpu-{chr(ord('a') + i)}")
            plugin = ["--node-name", name, "--kubeconfig", kubeconfig] if self.publish else []
            extra = list(self.agent_args[i]) if i < len(self.agent_args) else []
            local = self._stack.enter_context(
                LocalNode(
                    machine,
                    kubelet_args=[
                        "--kubeconfig", kubeconfig, "--node-name", name, "--node-labels",
                        f"{POOL}={self.kube.namespace}", "--node-status-update-frequency", "1s", *extra,
                    ],
                    plugin_args=[*plugin, *self.plugin_args],
                )
            )  # fmt: skip
            local.start_kubelet()
            local.start_plugin()
            self.nodes[name] = GpuNode(name, profiles.load(machine), local)
        self._host = self._stack.enter_context(LocalNode(machine=None))
        self._metrics_port = free_port()
        self._host.spawn(
            "scheduler",
            ["scheduler", "--kubeconfig", kubeconfig, "--config", str(config), "--metrics-listen",
             f"127.0.0.1:{self._metrics_port}"],
        )  # fmt: skip

    def close(self) -> None:
        if self._host is not None:  # kept beside the test's files (pytest keeps the last runs' tmp_path)
            (self.root / "scheduler.log").write_text(self._host.log("scheduler"))
        self._stack.close()
        client = self.kube.client()
        for name in self.nodes:
            with contextlib.suppress(ApiError):
                client.delete(Lease, name, namespace="kube-node-lease")

    # ----- nodes --------------------------------------------------------------------------------

    def node_object(self, name: str) -> Node | None:
        """The Node, or None while its agent has not registered it."""
        try:
            return self.kube.client().get(Node, name)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    def annotations(self, name: str) -> dict[str, str]:
        got = self.node_object(name)
        return dict((got.metadata.annotations if got and got.metadata else None) or {})

    def ready(self, name: str, gpus: int | None = None) -> bool:
        """Node registered, not tainted not-ready, ``gpus`` allocatable (by default its machine's count less the
        GPUs it publishes for shares) and, when the cluster publishes, its GPU description there."""
        got = self.node_object(name)
        if got is None:
            return False
        annotations = (got.metadata.annotations if got.metadata else None) or {}
        want = gpus
        if want is None:
            shares = 0
            if exactgpus.GPUS_ANNOTATION in annotations:
                shares = sum(exactgpus.read(name, annotations[exactgpus.GPUS_ANNOTATION]).milli)
            want = len(self.nodes[name].machine.gpus) - shares
        allocatable = (got.status.allocatable if got.status else None) or {}
        taints = (got.spec.taints if got.spec else None) or []
        return (
            allocatable.get(GPU, "0") == str(want)
            and (not self.publish or exactgpus.GPUS_ANNOTATION in annotations)
            and not any(t.key == NOT_READY for t in taints)
        )

    def wait_ready(self, name: str | None = None, gpus: int | None = None, within: float = 60) -> None:
        """Wait for one node (all when ``name`` is None) to be :meth:`ready`."""
        for each in [name] if name else list(self.nodes):
            wait_until(lambda each=each: self.ready(each, gpus), within=within, what=f"node {each} Ready")

    def published(self, name: str) -> exactgpus.NodeGpus:
        return exactgpus.read(name, self.annotations(name)[exactgpus.GPUS_ANNOTATION])

    # ----- pods ---------------------------------------------------------------------------------

    def manifest(self, name: str, gpus: int, *, priority_class: str | None = None, milli: int = 0) -> Pod:
        """A pod of this test: our profile, our node label, one container ``main`` asking ``gpus`` GPUs (or, with
        ``milli``, that share of one GPU)."""
        spec: dict[str, Any] = {
            "schedulerName": self.profile,
            "nodeSelector": {POOL: self.kube.namespace},
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/cuda:12.4.0-base",
                    "resources": {"limits": {GPU_MILLI: milli} if milli else {GPU: gpus}},
                }
            ],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})

    def create(self, name: str, gpus: int, *, priority_class: str | None = None, milli: int = 0) -> None:
        self.kube.client().create(self.manifest(name, gpus, priority_class=priority_class, milli=milli))

    def get(self, name: str) -> Pod | None:
        try:
            return self.kube.client().get(Pod, name)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    def running(self, name: str) -> Pod | None:
        pod = self.get(name)
        return pod if pod is not None and pod.status is not None and pod.status.phase == "Running" else None

    def wait_running(self, name: str, within: float = 60) -> Pod:
        try:
            return wait_until(lambda: self.running(name), within=within, what=f"pod {name} Running")
        except AssertionError as exc:
            got = self.get(name)
            raise AssertionError(f"{exc}\n{got.to_dict() if got else 'gone'}\n{self.logs()}") from None

    def run(self, name: str, gpus: int, *, priority_class: str | None = None) -> Running:
        """Create a pod, wait for it Running; what the scheduler chose and its container sees."""
        self.create(name, gpus, priority_class=priority_class)
        return running_pod(self.wait_running(name))

    def scheduler_log(self, lines: int = 30) -> str:
        return self._host.log_tail("scheduler", lines) if self._host else "(no scheduler)"

    def scheduler_queue(self) -> str:
        """The scheduler's pending-pods gauge lines (which queue a lost pod waits in, if any)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self._metrics_port}/metrics", timeout=2) as answer:
                text = answer.read().decode()
        except OSError as exc:
            return f"(no metrics: {exc})"
        return "\n".join(line for line in text.splitlines() if line.startswith("scheduler_pending_pods"))

    def logs(self, lines: int = 30) -> str:
        parts = [f"--- scheduler ---\n{self.scheduler_log(lines)}\n{self.scheduler_queue()}"]
        for name, node in self.nodes.items():
            parts.append(f"--- {name} plugin ---\n{node.local.log_tail('plugin', lines)}")
            parts.append(f"--- {name} agent ---\n{node.local.log_tail('kubelet', lines)}")
        return "\n".join(parts)


@dataclass(frozen=True)
class Running:
    """A Running pod: its node, the devices the scheduler wrote on it, what each container was set up with."""

    name: str
    node: str
    chosen: tuple[str, ...]
    visible: dict[str, tuple[str, ...]]

    @property
    def main(self) -> tuple[str, ...]:
        return self.visible["main"]


def running_pod(pod: Pod) -> Running:
    """Read a Running pod's pick (``kubegpu.io/gpu-devices``, empty when none) and its containers'
    ``NVIDIA_VISIBLE_DEVICES`` (from the node agent's runtime options annotation)."""
    assert pod.metadata is not None and pod.spec is not None
    annotations = pod.metadata.annotations or {}
    chosen = tuple(d for d in annotations.get(PICK, "").split(",") if d)
    options = json.loads(annotations.get(RUNTIME_OPTIONS, "{}"))
    visible = {
        container: tuple(d for d in str(opts.get("envs", {}).get("NVIDIA_VISIBLE_DEVICES", "")).split(",") if d)
        for container, opts in options.items()
    }
    return Running(str(pod.metadata.name), str(pod.spec.nodeName), chosen, visible)
