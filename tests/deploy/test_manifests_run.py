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

import json
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from kubegpu.demo.localnode import free_port
from tests.deploy import helmrender
from tests.deploy.podrun import MACHINE, NODE, Pod, daemonset, deployment, http_get, listen_here, registered, start
from tests.polling import wait_until

pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")


def test_the_default_daemonsets_register_serve_and_label(
    host: Path, procs: list[subprocess.Popen[bytes]], kube: Any
) -> None:
    objects = helmrender.render()
    simulated = {"KUBEGPU_MACHINE": MACHINE}

    # With the scheduler on (the default) the plugin publishes its node's GPUs: KUBEGPU_NODE_NAME from the
    # downward API, the API through its service account (here the in-process server's kubeconfig).
    plugin_node = kube.name("gpu-node")
    client = kube.client()
    client.create(Node(metadata=ObjectMeta(name=plugin_node)))
    plugin = Pod(daemonset(objects, "device-plugin"), objects, host, plugin_node)
    argv, env = plugin.command("device-plugin", {**simulated, "KUBECONFIG": str(kube.kubeconfig)})
    assert Path(argv[0]).name == "nvidia-device-plugin"
    assert env["KUBEGPU_NODE_NAME"] == plugin_node
    start(procs, argv, env, host / "plugin.log")
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 8, within=60, what="plugin registered"
    )

    def published() -> str:
        got = client.get(Node, plugin_node)
        return ((got.metadata.annotations if got.metadata else None) or {}).get("kubegpu.io/gpus", "")

    described = json.loads(wait_until(published, within=30, what="kubegpu.io/gpus on the plugin's Node"))
    assert described["version"] == "v1" and len(described["gpus"]) == 8

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

    argv, env = pod.command("device-plugin", {**in_cluster, "KUBEGPU_MACHINE": MACHINE})
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

    argv, env = pod.command("device-plugin", {**in_cluster, "KUBEGPU_MACHINE": MACHINE})
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
    argv, env = plugin.command("device-plugin", {**in_cluster, "KUBEGPU_MACHINE": MACHINE})
    start(procs, argv, env, host / "plugin.log")
    wait_until(
        lambda: registered(host).get("nvidia.com/gpu", {}).get("allocatable") == 32,
        within=60,
        what="the MPS-shared GPUs registered once the daemon is ready",
    )
    assert (host / "run" / "nvidia" / "mps" / ".ready").exists()


def test_the_scheduler_deployment_parses_its_config_holds_its_lease_and_binds_a_gpu_pod(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], kube: Any
) -> None:
    """The rendered Deployment's container with the rendered ConfigMap (the tutorial's gpu-scheduler profile) as
    its /etc/kubegpu, released into the test's namespace (its Lease is there), the pod's service account being the
    API server's kubeconfig; its metrics port is a free loopback port."""
    from lightkube.resources.coordination_v1 import Lease
    from lightkube.resources.core_v1 import Pod as KubePod

    from tests.scheduling.live.cluster import add_node, create_pod, node_of

    objects = helmrender.render(namespace=kube.namespace)
    scheduler = Pod(deployment(objects, "scheduler"), objects, tmp_path, "")
    argv, env = scheduler.command("scheduler", {"KUBECONFIG": str(kube.kubeconfig), "PYTHONUNBUFFERED": "1"})
    assert Path(argv[0]).name == "kubegpu" and argv[1] == "scheduler"
    port = free_port()
    argv = listen_here(argv, "--metrics-listen", port)
    assert f"--metrics-listen=127.0.0.1:{port}" in argv, argv
    node = add_node(kube, "gpu", gpus=8)
    proc = start(procs, argv, env, tmp_path / "scheduler.log")

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "scheduler.log").read_text()
        return http_get(port, "/readyz")[0] == 200

    wait_until(ready, within=30, what="the scheduler ready (/readyz)")
    started = (tmp_path / "scheduler.log").read_text()
    assert "gpu-scheduler" in started  # the profile of the mounted config, not a flag's default

    def holder() -> str:
        try:
            lease = kube.client().get(Lease, "kubegpu-scheduler", namespace=kube.namespace)
        except ApiError:
            return ""
        return (lease.spec.holderIdentity if lease.spec else None) or ""

    assert wait_until(holder, within=30, what="the kubegpu-scheduler Lease held")
    create_pod(kube, "train", "gpu-scheduler", gpus=2)
    client = kube.client()
    assert wait_until(lambda: node_of(client, kube.namespace, "train"), within=30, what="pod bound") == node
    pod = client.get(KubePod, "train", namespace=kube.namespace)
    assert (pod.metadata.annotations or {}).get("kubegpu.io/gpu-devices")  # type: ignore[union-attr]
    assert http_get(port, "/metrics")[0] == 200
