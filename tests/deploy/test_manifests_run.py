"""The rendered DaemonSets run the program: each container's command, args and env, taken from the chart, start
against the kubelet emulator — the plugin registers, the exporter serves, the labels are written.

A container runs as a process of this machine with its pod's view of the host: every hostPath volume is a
directory under one temporary "host" root (so two DaemonSets mounting the same host path share it), every
mountPath in an arg or env value is rewritten to the host directory behind it, emptyDirs are fresh directories,
configMap volumes hold the rendered ConfigMap's keys, ``fieldRef: spec.nodeName`` is the node's name and a
container port becomes a free loopback port. What cannot be here is faked as low as possible: the GPUs are the
simulated ``dgx-a100`` (``KUBEGPU_MACHINE``, ``--machine`` for the exporter) and the kubelet is the emulator,
whose sockets sit where a kubelet's do under the host root. The config-manager's in-cluster service account is the
in-process API server's kubeconfig.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from kubegpu.localnode import LocalNode, free_port
from tests.deploy import helmrender
from tests.polling import wait_until

pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")

BIN = Path(sys.executable).parent
MACHINE = "dgx-a100"
NODE = "gpu-node-1"


@dataclass
class Pod:
    """One rendered pod template laid out on the temporary host."""

    workload: dict[str, Any]
    objects: list[dict[str, Any]]
    host: Path
    node_name: str
    mounts: dict[str, Path] = field(default_factory=dict)  # container mountPath -> directory here

    def __post_init__(self) -> None:
        spec = self.workload["spec"]["template"]["spec"]
        self.volumes = {v["name"]: v for v in spec.get("volumes", [])}
        self.containers = {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}

    def _volume_dir(self, name: str) -> Path:
        volume = self.volumes[name]
        if "hostPath" in volume:
            path = self.host / volume["hostPath"]["path"].lstrip("/")
        elif "emptyDir" in volume:
            path = self.host / "pods" / self.workload["metadata"]["name"] / name
        elif "configMap" in volume:
            path = self.host / "pods" / self.workload["metadata"]["name"] / name
            data = next(
                o
                for o in self.objects
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
            )
            path.mkdir(parents=True, exist_ok=True)
            for key, text in data["data"].items():
                (path / key).write_text(text)
        else:
            raise AssertionError(f"volume kind not laid out by this test: {volume}")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _map(self, text: str, mounts: dict[str, Path]) -> str:
        flag, eq, value = text.partition("=") if text.startswith("--") else ("", "", text)
        for mount in sorted(mounts, key=len, reverse=True):
            if value == mount or value.startswith(mount + "/"):
                value = str(mounts[mount]) + value[len(mount) :]
                break
        return f"{flag}{eq}{value}"

    def command(self, name: str, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
        """argv and environment of container ``name`` as this machine runs it."""
        container = self.containers[name]
        mounts = {m["mountPath"]: self._volume_dir(m["name"]) for m in container.get("volumeMounts", [])}
        command = [*container["command"], *container.get("args", [])]
        argv = [str(BIN / command[0]), *(self._map(a, mounts) for a in command[1:])]
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEGPU_", "NODE_", "CONFIG_", "MIG_"))}
        for item in container.get("env", []):
            if "value" in item:
                environ[item["name"]] = self._map(item["value"], mounts)
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                environ[item["name"]] = self.node_name
            else:
                raise AssertionError(f"env source not mapped by this test: {item}")
        environ.update(env or {})
        return argv, environ


@pytest.fixture
def host() -> Iterator[Path]:
    node = LocalNode(machine=MACHINE)
    root = node.root
    # The emulator's sockets where a kubelet's are: <host>/var/lib/kubelet/{device-plugins,pod-resources}.
    node.root = root / "var" / "lib" / "kubelet"
    try:
        node.start_kubelet()
        yield root
    finally:
        node.close()
        node.root = root
        node.close()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def start(
    procs: list[subprocess.Popen[bytes]], argv: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    procs.append(proc)
    return proc


def registered(host: Path) -> dict[str, Any]:
    from kubegpu.kubelet import client

    resources: dict[str, Any] = client.status(host / "var" / "lib" / "kubelet" / "device-plugins")["resources"]
    return resources


def daemonset(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == f"kubegpu-{component}")


def test_the_default_daemonsets_register_serve_and_label(host: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    objects = helmrender.render()
    simulated = {"KUBEGPU_MACHINE": MACHINE}

    plugin = Pod(daemonset(objects, "device-plugin"), objects, host, NODE)
    argv, env = plugin.command("device-plugin", simulated)
    assert Path(argv[0]).name == "nvidia-device-plugin"
    start(procs, argv, env, host / "plugin.log")
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 8, within=60, what="plugin registered"
    )

    gfd = Pod(daemonset(objects, "gpu-feature-discovery"), objects, host, NODE)
    argv, env = gfd.command("gpu-feature-discovery", simulated)
    start(procs, argv, env, host / "gfd.log")
    labels = host / "etc" / "kubernetes" / "node-feature-discovery" / "features.d" / "gfd"
    text = wait_until(lambda: labels.exists() and labels.read_text(), within=60, what="labels written")
    assert "nvidia.com/gpu.count=8" in text and "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in text

    exporter = Pod(daemonset(objects, "exporter"), objects, host, NODE)
    argv, env = exporter.command("exporter")
    port = free_port()
    container_port = exporter.containers["exporter"]["ports"][0]["containerPort"]
    argv = [a.replace(f"--listen=:{container_port}", f"--listen=127.0.0.1:{port}") for a in argv]
    assert f"--listen=127.0.0.1:{port}" in argv, argv
    start(procs, [*argv, "--machine", MACHINE], env, host / "exporter.log")

    def scrape() -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
                body: str = answer.read().decode()
                return body
        except OSError:
            return ""

    metrics = wait_until(lambda: "DCGM_FI_DEV_GPU_TEMP{" in scrape() and scrape(), within=60, what="exporter serving")
    assert 'Hostname="gpu-node-1"' in metrics  # NODE_NAME from the downward API
    assert "kubegpu_exporter_pod_resources_up 1" in metrics  # it reached the kubelet through the mounted socket
    for proc in procs:
        assert proc.poll() is None, f"{proc.args[0]} exited"


TIME_SLICING = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n"
)


def test_the_config_manager_init_links_the_config_the_node_label_names(
    host: Path, procs: list[subprocess.Popen[bytes]], kube: Any
) -> None:
    values = {"config": {"map": {"default": "version: v1\n", "time-sliced": TIME_SLICING}, "default": "default"}}
    objects = helmrender.render(values)
    node_name = kube.name("gpu-node")
    kube.client().create(
        Node(metadata=ObjectMeta(name=node_name, labels={"nvidia.com/device-plugin.config": "time-sliced"}))
    )
    in_cluster = {"KUBECONFIG": str(kube.kubeconfig), "KUBEGPU_MACHINE": MACHINE}
    pod = Pod(daemonset(objects, "device-plugin"), objects, host, node_name)

    argv, env = pod.command("config-manager-init", in_cluster)
    assert Path(argv[0]).name == "config-manager"
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr

    argv, env = pod.command("device-plugin", {"KUBEGPU_MACHINE": MACHINE})
    start(procs, argv, env, host / "plugin.log")
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 32,
        within=60,
        what="the time-sliced config registered 8 GPUs x 4 replicas",
    )


def test_the_config_manager_sidecar_switches_the_plugin_when_the_label_changes(
    host: Path, procs: list[subprocess.Popen[bytes]], kube: Any
) -> None:
    """The pod's three containers as rendered: the init container links, the plugin serves, the sidecar relinks
    and SIGHUPs the plugin when the label changes. The shared process namespace is this machine's, so the plugin
    runs under a name of its own (PROCESS_TO_SIGNAL follows it) and no other test's plugin is signalled."""
    values = {"config": {"map": {"default": "version: v1\n", "time-sliced": TIME_SLICING}, "default": "default"}}
    objects = helmrender.render(values)
    node_name = kube.name("gpu-node")
    client = kube.client()
    client.create(Node(metadata=ObjectMeta(name=node_name)))
    in_cluster = {"KUBECONFIG": str(kube.kubeconfig)}
    pod = Pod(daemonset(objects, "device-plugin"), objects, host, node_name)

    argv, env = pod.command("config-manager-init", in_cluster)
    assert subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False).returncode == 0

    argv, env = pod.command("device-plugin", {"KUBEGPU_MACHINE": MACHINE})
    alias = host / f"kg-{uuid.uuid4().hex[:8]}"
    alias.symlink_to(argv[0])
    start(procs, [str(alias), *argv[1:]], env, host / "plugin.log")
    wait_until(lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 8, within=60, what="default")

    argv, env = pod.command("config-manager", {**in_cluster, "PROCESS_TO_SIGNAL": alias.name})
    assert env["SEND_SIGNAL"] == "true" and env["ONESHOT"] == "false"
    start(procs, argv, env, host / "config-manager.log")
    client.patch(Node, node_name, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "time-sliced"}}})
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 32,
        within=60,
        what="the plugin reloaded the time-sliced config after the label change",
    )


def test_mps_sharing_runs_the_control_daemon_and_the_plugin_serves_once_it_is_ready(
    host: Path, procs: list[subprocess.Popen[bytes]], kube: Any
) -> None:
    """MPS as rendered: both pods' config-manager inits pick the only config, the daemon (NVIDIA's MPS programs
    faked, as no GPU is here) writes its readiness files under the shared MPS root, the plugin registers 8 x 4.
    The daemon's mount-shm init container is tested on its own (tests/test_mpsshm.py): it mounts on the host."""
    from tests.deviceplugin.fixtures import fake_mps

    mps = "version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n"
    objects = helmrender.render({"config": {"map": {"mps": mps}}})
    node_name = kube.name("gpu-node")
    kube.client().create(Node(metadata=ObjectMeta(name=node_name)))
    in_cluster = {"KUBECONFIG": str(kube.kubeconfig)}
    fakes = fake_mps.install(host)
    hardware = {
        "KUBEGPU_MACHINE": MACHINE,
        "MPS_CONTROL_PROGRAM": str(fakes["nvidia-cuda-mps-control"]),
        "NVIDIA_SMI": str(fakes["nvidia-smi"]),
        "FAKE_MPS_RECORD": str(fakes["record"]),
    }
    daemon = Pod(daemonset(objects, "mps-control-daemon"), objects, host, node_name)
    plugin = Pod(daemonset(objects, "device-plugin"), objects, host, node_name)
    for pod in (daemon, plugin):
        argv, env = pod.command("config-manager-init", in_cluster)
        assert subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False).returncode == 0

    argv, env = daemon.command("mps-control-daemon", hardware)
    assert Path(argv[0]).name == "mps-control-daemon"
    start(procs, argv, env, host / "mps.log")
    argv, env = plugin.command("device-plugin", {"KUBEGPU_MACHINE": MACHINE})
    start(procs, argv, env, host / "plugin.log")
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 32,
        within=60,
        what="the MPS-shared GPUs registered once the daemon is ready",
    )
    assert (host / "run" / "nvidia" / "mps" / ".ready").exists()
