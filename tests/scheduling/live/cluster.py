"""What the live scheduler's tests do to the API: Nodes as a kubelet registers them, pods, the kubelet's part of
deletion, and the scheduler as a real process (``python -m kubegpu.cli scheduler``).

Everything is named from the ``kube`` fixture's prefix and namespace, nodes carry a label of their own and
every pod selects it, so that on a real cluster (``KUBEGPU_TEST_KUBECONFIG``) the test stays off real nodes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.events_v1 import Event

from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

TEST_LABEL = "kubegpu.io/test-pool"
ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy/helm/kubegpu/files/crds/podgroups.yaml"
A100 = "NVIDIA-A100-SXM4-80GB"


def add_node(
    kube: KubeEnv, suffix: str, gpus: int = 8, product: str = A100, cpu: str = "128", memory: str = "1Ti"
) -> str:
    """A dgx-a100-like Node with allocatable and a Ready condition, as a kubelet registers it; waits for it to be
    schedulable (the control plane lifts the not-ready taint)."""
    name = kube.name(suffix)
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    status = {"capacity": allocatable, "allocatable": allocatable, "conditions": [ready]}
    labels = {
        "kubernetes.io/hostname": name,
        TEST_LABEL: kube.prefix,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
    }
    client = kube.client()
    client.create(Node.from_dict({"metadata": {"name": name, "labels": labels}, "status": status}))
    client.patch(Node.Status, name, {"status": status})

    def schedulable() -> bool:
        node = client.get(Node, name)
        taints = (node.spec.taints if node.spec else None) or []
        return not any(t.key == "node.kubernetes.io/not-ready" for t in taints)

    wait_until(schedulable, within=60, what=f"node {name} without the not-ready taint")
    return name


def pod_manifest(
    kube: KubeEnv,
    name: str,
    scheduler: str,
    gpus: int = 1,
    node_selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": {TEST_LABEL: kube.prefix, **(node_selector or {})},
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": limits}}],
        "terminationGracePeriodSeconds": 1,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def create_pod(kube: KubeEnv, name: str, scheduler: str, **kw: Any) -> None:
    kube.client().create(Pod.from_dict(pod_manifest(kube, name, scheduler, **kw)))


def pods(client: Client, namespace: str) -> dict[str, Pod]:
    return {p.metadata.name: p for p in client.list(Pod, namespace=namespace)}  # type: ignore[union-attr]


def node_of(client: Client, namespace: str, name: str) -> str:
    try:
        pod = client.get(Pod, name, namespace=namespace)
    except ApiError:
        return ""
    return (pod.spec.nodeName if pod.spec else None) or ""


def events(client: Client, namespace: str, reason: str) -> dict[str, list[Event]]:
    """events.k8s.io/v1 Events of one reason, by the pod they are about."""
    out: dict[str, list[Event]] = {}
    for e in client.list(Event, namespace=namespace):
        if e.reason == reason and e.regarding is not None and e.regarding.name:
            out.setdefault(e.regarding.name, []).append(e)
    return out


def finish_deletions(client: Client, namespace: str) -> int:
    """The kubelet's part: pods marked for deletion are deleted with grace 0 (their containers 'stopped')."""
    done = 0
    for pod in client.list(Pod, namespace=namespace):
        if pod.metadata is not None and pod.metadata.deletionTimestamp is not None:
            try:
                client.delete(Pod, pod.metadata.name, namespace=namespace, grace_period=0)  # type: ignore[arg-type]
            except ApiError:
                continue
            done += 1
    return done


def set_running(client: Client, namespace: str, name: str) -> None:
    """Report the pod Running and Ready, as its kubelet would."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("PodScheduled", "Ready")]
    client.patch(Pod.Status, name, {"status": {"phase": "Running", "conditions": conditions}}, namespace=namespace)


def write_config(path: Path, profiles: list[dict[str, Any]], lease_namespace: str, lease_name: str) -> Path:
    """A KubeSchedulerConfiguration with these profiles and the test's own Lease."""
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"resourceNamespace": lease_namespace, "resourceName": lease_name},
        "profiles": profiles,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def fit_profile(name: str, strategy: str = "MostAllocated") -> dict[str, Any]:
    return {
        "schedulerName": name,
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": strategy,
                        "resources": [
                            {"name": "nvidia.com/gpu", "weight": 100},
                            {"name": "cpu", "weight": 1},
                            {"name": "memory", "weight": 1},
                        ],
                    }
                },
            }
        ],
    }


class SchedulerProcess:
    """``kubegpu scheduler`` as a separate process, its log in a file."""

    def __init__(self, kube: KubeEnv, config: Path, log: Path, *flags: str) -> None:
        self.log_path = log
        self.log = log.open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "kubegpu.cli", "scheduler", "--kubeconfig", str(kube.kubeconfig),
                "--config", str(config), "--metrics-listen", "127.0.0.1:0", *flags,
            ],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str) -> tuple[int, str]:
        """GET a path of its metrics server (port from its start line)."""

        def port() -> int:
            for line in self.text().splitlines():
                if "scheduler started" in line and "metrics_port=" in line:
                    return int(line.split("metrics_port=")[1].split()[0])
            return 0

        url = f"http://127.0.0.1:{wait_until(port, within=30, what='scheduler start line')}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode
