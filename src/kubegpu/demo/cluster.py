"""``kubegpu demo cluster``: the whole chain on an API server — scheduler → API → node agents → plugins.

Owns the script of the cluster demo: check that the API server answers, start
N emulated GPU nodes (``kubegpu kubelet --kubeconfig`` + ``kubegpu plugin`` per
node, one optionally time-sliced so that fractional pods have somewhere to go)
and ``kubegpu scheduler`` with the tutorial's ``gpu-scheduler`` profile as real
processes, submit a batch of mixed pods (whole, multi-GPU, fractional, a gang
with its PodGroup, then a high-priority preemptor), and print where everything
landed and which GPUs each container got (from the node agent's
``kubegpu.io/runtime-options`` annotation); then delete everything it created.
Everything it creates carries one run id, and pods select the demo's nodes
only, so it is safe on a shared cluster. Must not reach into the processes: it
reads only what they write to the API.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kubegpu.demo.localnode import LocalNode, NodeError, free_port
from kubegpu.demo.reporter import Reporter

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
DEMO_LABEL = "kubegpu.io/demo"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
OPTIONS_ANNOTATION = "kubegpu.io/runtime-options"
PROFILE = "gpu-scheduler"
CRD_FILE = Path(__file__).resolve().parents[3] / "deploy/helm/kubegpu/files/crds/podgroups.yaml"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"

#: The batch before the preemptor: (name, kind, resource, count, gang).
BATCH: tuple[tuple[str, str, str, int, bool], ...] = (
    ("train-4gpu", "multi-GPU", GPU, 4, False),
    ("train-2gpu", "multi-GPU", GPU, 2, False),
    ("infer-a", "whole GPU", GPU, 1, False),
    ("infer-b", "whole GPU", GPU, 1, False),
    ("notebook-a", "fractional", SHARED, 1, False),
    ("notebook-b", "fractional", SHARED, 1, False),
    ("notebook-c", "fractional", SHARED, 1, False),
    *((f"gang-{i}", "gang of 4", GPU, 1, True) for i in range(4)),
)
PREEMPTOR = ("urgent-8gpu", "preemptor", GPU, 8, False)


class DemoError(Exception):
    """The demo cannot run (no API server, a process did not come up); the message is one line."""


def _time_slicing_config(replicas: int) -> str:
    return yaml.safe_dump(
        {
            "version": "v1",
            "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": GPU, "replicas": replicas}]}},
        }
    )


def pod_manifest(
    name: str, resource: str, count: int, run: str, priority_class: str, gang: str | None = None
) -> dict[str, Any]:
    labels = {DEMO_LABEL: run}
    if gang:
        labels[POD_GROUP_LABEL] = gang
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": PROFILE,
            "priorityClassName": priority_class,
            "nodeSelector": {DEMO_LABEL: run},
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": IMAGE, "resources": {"limits": {resource: count}}}],
        },
    }


def container_gpus(pod: dict[str, Any]) -> dict[str, list[str]]:
    """Each container's device IDs from the agent's runtime-options annotation (empty before it ran)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(OPTIONS_ANNOTATION)
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except ValueError:
        return {}
    return {
        name: [d for ids in (entry.get("resources") or {}).values() for d in ids]
        for name, entry in options.items()
        if isinstance(entry, dict)
    }


def placement_rows(
    pods: dict[str, dict[str, Any]], kinds: dict[str, str], requests: dict[str, str], evicted: set[str]
) -> list[dict[str, Any]]:
    """One row per demo pod: where it landed, which GPUs its container got, what became of it."""
    rows = []
    for name, kind in kinds.items():
        pod = pods.get(name)
        if pod is None:
            state, node, gpus = ("evicted (preempted)" if name in evicted else "gone"), "", {}
        else:
            status = pod.get("status") or {}
            state = status.get("phase") or "Pending"
            if status.get("reason"):
                state += f" ({status['reason']})"
            node, gpus = (pod.get("spec") or {}).get("nodeName") or "", container_gpus(pod)
        rows.append({"pod": name, "kind": kind, "asks": requests[name], "node": node, "status": state, "devices": gpus})
    return rows


def _short(ids: list[str]) -> str:
    """``GPU-70542ca2…``: enough of each UUID to tell the GPUs of one machine apart; a replica keeps its ``::n``."""
    out = []
    for device in ids:
        head, sep, replica = device.partition("::")
        out.append((head[:12] + "…" if len(head) > 12 else head) + sep + replica)
    return ", ".join(out)


class ClusterDemo:
    def __init__(self, kubeconfig: Path, machines: list[str], shared: str | None, out: Reporter) -> None:
        from lightkube import Client, KubeConfig

        self.kubeconfig = kubeconfig
        self.out = out
        self.run = "kgdemo-" + uuid.uuid4().hex[:6]
        self.namespace = self.run
        self.client = Client(config=KubeConfig.from_file(kubeconfig), namespace=self.namespace)
        self.machines = machines
        self.shared = shared
        self.nodes: dict[str, LocalNode] = {}
        self.low, self.high = f"{self.run}-batch", f"{self.run}-urgent"
        self.created_crd = False
        self.cleanups: list[Callable[[], object]] = []

    # ----- set-up ------------------------------------------------------------------------

    def check_api(self) -> str:
        from lightkube.resources.core_v1 import Namespace

        server = self.client.config.cluster.server
        try:
            next(iter(self.client.list(Namespace, chunk_size=1)), None)
        except Exception as exc:
            raise DemoError(f"the API server at {server} does not answer: {type(exc).__name__}: {exc}") from None
        return server

    def start_nodes(self) -> None:
        specs = [(m, False) for m in self.machines] + ([(self.shared, True)] if self.shared else [])
        for i, (machine, shared) in enumerate(specs, start=1):
            name = f"{self.run}-gpu-{i}"
            node = LocalNode(machine=machine)
            plugin_args: list[str] = []
            if shared:
                config = node.root / "time-slicing.yaml"
                config.write_text(_time_slicing_config(4))
                plugin_args = ["--config-file", str(config)]
            node.plugin_args = plugin_args
            labels = {**self.gfd_labels(node, machine, plugin_args), DEMO_LABEL: self.run}
            node.kubelet_args = [
                "--kubeconfig",
                str(self.kubeconfig),
                "--node-name",
                name,
                "--node-labels",
                ",".join(f"{k}={v}" for k, v in labels.items()),
                "--node-status-update-frequency",
                "1s",
            ]
            self.nodes[name] = node
            node.start_kubelet()
            node.start_plugin()
        for name in self.nodes:
            self._wait(functools.partial(self._schedulable, name), 60, f"node {name} Ready with its GPUs")

    def gfd_labels(self, node: LocalNode, machine: str, plugin_args: list[str]) -> dict[str, str]:
        """What GPU feature discovery + NFD would put on the Node: ``kubegpu labels --oneshot`` on its machine."""
        out = node.root / "gfd-labels"
        done = node.cli(
            "labels",
            "--machine",
            machine,
            "--oneshot",
            "--no-timestamp",
            "--use-node-feature-api=false",
            "--output-file",
            str(out),
            *plugin_args,
        )
        if done.returncode != 0 or not out.exists():
            raise DemoError(f"kubegpu labels --machine {machine} failed: {done.stderr.strip()[-300:]}")
        pairs = (line.partition("=") for line in out.read_text().splitlines() if "=" in line)
        return {k: v for k, _, v in pairs if k.startswith("nvidia.com/")}

    def _schedulable(self, name: str) -> bool:
        from lightkube import ApiError
        from lightkube.resources.core_v1 import Node

        try:
            node = self.client.get(Node, name)
        except ApiError:
            return False
        taints = (node.spec.taints if node.spec else None) or []
        allocatable = (node.status.allocatable if node.status else None) or {}
        has_gpus = any(allocatable.get(r, "0") not in ("0", "") for r in (GPU, SHARED))
        return has_gpus and not any(t.key == "node.kubernetes.io/not-ready" for t in taints)

    def start_scheduler(self) -> None:
        first = next(iter(self.nodes.values()))
        config = first.root / "scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    # The demo's scheduler is the only one for its pods' nodes: no election.
                    "leaderElection": {"leaderElect": False},
                    "profiles": [
                        {
                            "schedulerName": PROFILE,
                            "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 1}]}},
                            "pluginConfig": [
                                {
                                    "name": "NodeResourcesFit",
                                    "args": {
                                        "scoringStrategy": {
                                            "type": "MostAllocated",
                                            "resources": [
                                                {"name": GPU, "weight": 100},
                                                {"name": "cpu", "weight": 1},
                                                {"name": "memory", "weight": 1},
                                            ],
                                        }
                                    },
                                }
                            ],
                        }
                    ],
                }
            )
        )
        first.spawn(
            "scheduler",
            [
                "scheduler",
                "--kubeconfig",
                str(self.kubeconfig),
                "--config",
                str(config),
                "--metrics-listen",
                f"127.0.0.1:{free_port()}",
            ],
        )

    def create_objects(self) -> bool:
        """Namespace, PriorityClasses, the PodGroup (its CRD when missing); False when gangs are unavailable."""
        from lightkube import ApiError
        from lightkube.generic_resource import create_namespaced_resource
        from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
        from lightkube.resources.core_v1 import Namespace
        from lightkube.resources.scheduling_v1 import PriorityClass

        meta = {"name": self.namespace, "labels": {DEMO_LABEL: self.run}}
        self._create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        self.cleanups.append(functools.partial(self.client.delete, Namespace, self.namespace))
        for name, value in ((self.low, 1000), (self.high, 1_000_000)):
            self._create(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                }
            )
            self.cleanups.append(functools.partial(self.client.delete, PriorityClass, name))
        pod_group = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
        try:
            list(self.client.list(pod_group))
        except ApiError:
            if not CRD_FILE.exists():
                return False
            self._create(yaml.safe_load(CRD_FILE.read_text()))
            self.created_crd = True
            crd = "podgroups.scheduling.x-k8s.io"
            self.cleanups.append(lambda: self.client.delete(CustomResourceDefinition, crd))
            self._wait(lambda: _answers(lambda: list(self.client.list(pod_group))), 30, "the PodGroup CRD served")
        self._create(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": self.namespace},
                "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60},
            }
        )
        return True

    # ----- the batch ---------------------------------------------------------------------

    def _create(self, manifest: dict[str, Any]) -> None:
        from lightkube import codecs

        obj: Any = codecs.from_dict(manifest)
        self.client.create(obj)

    def submit(self, pods: tuple[tuple[str, str, str, int, bool], ...], priority_class: str) -> None:
        for name, _, resource, count, gang in pods:
            manifest = pod_manifest(name, resource, count, self.run, priority_class, "gang" if gang else None)
            manifest["metadata"]["namespace"] = self.namespace
            self._create(manifest)

    def pods(self) -> dict[str, dict[str, Any]]:
        from lightkube.resources.core_v1 import Pod

        return {p.metadata.name: p.to_dict() for p in self.client.list(Pod) if p.metadata and p.metadata.name}

    def preempted(self) -> set[str]:
        """Pods the scheduler reported ``Preempted`` (events.k8s.io/v1, as kube-scheduler writes them)."""
        from lightkube.resources.events_v1 import Event

        return {
            e.regarding.name
            for e in self.client.list(Event)
            if e.reason == "Preempted" and e.regarding is not None and e.regarding.name
        }

    def _wait(self, check: Callable[[], bool], within: float, what: str) -> None:
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise DemoError(f"{what}: not within {within:g} s")
            time.sleep(0.2)

    def running(self, names: list[str]) -> Callable[[], bool]:
        def check() -> bool:
            pods = self.pods()
            return all((pods.get(n, {}).get("status") or {}).get("phase") == "Running" for n in names)

        return check

    # ----- tear-down ---------------------------------------------------------------------

    def close(self) -> None:
        from lightkube import ApiError
        from lightkube.resources.coordination_v1 import Lease
        from lightkube.resources.core_v1 import Node, Pod

        if self.nodes:
            next(iter(self.nodes.values())).stop("scheduler")
        with contextlib.suppress(ApiError):
            for name in self.pods():
                with contextlib.suppress(ApiError):
                    self.client.delete(Pod, name)
        # The agents finish the deletions (grace period 0), as kubelets do; then they stop.
        with contextlib.suppress(DemoError, ApiError):
            self._wait(lambda: not self.pods(), 30, "the demo's pods deleted")
        for node in self.nodes.values():
            node.close()
        for name in self.nodes:
            with contextlib.suppress(ApiError):
                self.client.delete(Node, name)
            with contextlib.suppress(ApiError):
                self.client.delete(Lease, name, namespace="kube-node-lease")
        for cleanup in reversed(self.cleanups):
            with contextlib.suppress(ApiError):
                cleanup()
        self.client.close()


def _answers(call: Callable[[], object]) -> bool:
    try:
        call()
    except Exception:
        return False
    return True


def _run(demo: ClusterDemo, out: Reporter) -> None:
    out.step("1. The API server")
    server = demo.check_api()
    out.emit(
        "api", f"API server {server}; run {demo.run} (namespace, nodes, PriorityClasses)", server=server, run=demo.run
    )

    out.step("2. Emulated GPU nodes: kubegpu kubelet --kubeconfig + kubegpu plugin each, and kubegpu scheduler")
    gangs = demo.create_objects()
    demo.start_nodes()
    demo.start_scheduler()
    from lightkube.resources.core_v1 import Node

    rows = []
    for name, local in demo.nodes.items():
        node = demo.client.get(Node, name)
        alloc = (node.status.allocatable if node.status else None) or {}
        resource = GPU if GPU in alloc else SHARED
        labels = (node.metadata.labels if node.metadata else None) or {}
        product = labels.get("nvidia.com/gpu.product", "")
        rows.append([name, local.machine or "nvml", product, resource, alloc.get(resource, "0")])
    columns = ["node", "machine", "nvidia.com/gpu.product", "resource", "allocatable"]
    out.table("Nodes", columns, rows)
    keys = ("node", "machine", "product", "resource", "allocatable")
    out.emit("nodes", nodes=[dict(zip(keys, r, strict=True)) for r in rows])

    out.step("3. A batch of mixed pods (schedulerName gpu-scheduler)")
    batch = tuple(p for p in BATCH if gangs or not p[4])
    if not gangs:
        out.emit("note", "the API server has no PodGroup CRD and none could be installed: no gang in this run")
    demo.submit(batch, demo.low)
    demo._wait(demo.running([p[0] for p in batch]), 90, "every pod of the batch Running")
    out.check("every pod of the batch runs", True, f"{len(batch)} pods")

    out.step("4. A high-priority 8-GPU pod that fits only by preemption")
    demo.submit((PREEMPTOR,), demo.high)
    demo._wait(demo.running([PREEMPTOR[0]]), 90, f"{PREEMPTOR[0]} Running")
    out.check("the preemptor runs after evicting lower-priority pods", True)

    out.step(f"5. Where everything landed (nodes {demo.run}-…)")
    kinds = {p[0]: p[1] for p in (*batch, PREEMPTOR)}
    asks = {p[0]: f"{p[3]} {p[2]}" for p in (*batch, PREEMPTOR)}
    placed = placement_rows(demo.pods(), kinds, asks, demo.preempted())
    out.table(
        "Placement",
        ["pod", "kind", "asks", "node", "status", "devices of its container"],
        [
            [
                r["pod"],
                r["kind"],
                r["asks"].replace("nvidia.com/", ""),
                r["node"].removeprefix(f"{demo.run}-"),
                r["status"],
                _short(r["devices"].get("main", [])),
            ]
            for r in placed
        ],
    )
    out.emit("placement", pods=placed)
    held = [d for r in placed if r["status"] == "Running" for d in r["devices"].get("main", [])]
    per_node: dict[str, list[str]] = {}
    for r in placed:
        if r["status"] == "Running" and r["asks"].endswith(GPU):
            per_node.setdefault(r["node"], []).extend(r["devices"].get("main", []))
    out.check(
        "no whole GPU is given to two running containers of one node",
        all(len(ids) == len(set(ids)) for ids in per_node.values()),
        f"{len(held)} device IDs held",
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kubegpu demo cluster",
        description="The whole chain on a Kubernetes API server: emulated GPU nodes (node agent + plugin each), "
        "kubegpu scheduler, a batch of mixed pods and a preemptor, and where everything landed.",
    )
    parser.add_argument("--kubeconfig", type=Path, help="the API server to use (default: $KUBECONFIG)")
    parser.add_argument(
        "--nodes",
        default="dgx-a100,dgx-a100",
        metavar="PROFILE,...",
        help="machine profiles of the whole-GPU nodes (default: dgx-a100,dgx-a100)",
    )
    parser.add_argument(
        "--shared-node",
        default="dgx-a100",
        metavar="PROFILE",
        help="one more node whose GPUs are time-sliced 4 ways (nvidia.com/gpu.shared), for fractional pods; "
        "'none' for no such node (default: dgx-a100)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line; the last is the summary")
    args = parser.parse_args(argv)
    kubeconfig = args.kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if kubeconfig is None:
        print(
            "kubegpu demo cluster: needs a Kubernetes API server: pass --kubeconfig FILE (or set KUBECONFIG)",
            file=sys.stderr,
        )
        return 2
    from kubegpu.gpu import errors as gpu_errors
    from kubegpu.gpu import profiles

    machines = [m.strip() for m in args.nodes.split(",") if m.strip()]
    shared = None if args.shared_node == "none" else args.shared_node
    for flag, name in [*(("--nodes", m) for m in machines), *((("--shared-node", shared),) if shared else ())]:
        try:
            profiles.load(name)
        except gpu_errors.ProfileError as exc:
            parser.error(f"{flag}: {exc}")
    if not machines:
        parser.error("--nodes: at least one machine profile")
    from kubegpu import kubeconfig as kubeconfigs

    try:
        kubeconfigs.load(str(kubeconfig))
    except kubeconfigs.KubeconfigError as exc:
        print(f"kubegpu demo cluster: {exc}", file=sys.stderr)
        return 2

    out = Reporter(as_json=args.json)
    demo = ClusterDemo(kubeconfig, machines, shared, out)
    try:
        demo.check_api()
    except DemoError as exc:
        print(f"kubegpu demo cluster: {exc}", file=sys.stderr)
        return 2
    error = ""
    try:
        try:
            _run(demo, out)
        except (DemoError, NodeError, TimeoutError, OSError) as exc:
            error = str(exc)
        except Exception as exc:  # an API refusal (lightkube.ApiError) or the like: one line, then clean up
            error = f"{type(exc).__name__}: {exc}"
        if error:
            out.check("the demo ran to the end", False, error)
            if not args.json:
                for node_name, local in demo.nodes.items():
                    for process in ("scheduler", "kubelet", "plugin"):
                        if local.log(process):
                            print(f"--- {node_name}: {process} log ---\n{local.log_tail(process, 8)}", file=sys.stderr)
    finally:
        demo.close()
    failed = [c["check"] for c in out.checks if not c["ok"]]
    out.emit(
        "summary",
        f"{'[green]all checks held[/]' if not failed else '[red]failed: ' + ', '.join(failed) + '[/]'} "
        f"({out.elapsed():.1f} s)",
        ok=not failed,
        seconds=out.elapsed(),
        failed=failed,
    )
    return 0 if not failed else 1
