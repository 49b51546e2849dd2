"""The exporter's API client against an API server (in-process, or the cluster KUBEGPU_TEST_KUBECONFIG names):
the cache of this node's pods, the background GET of a pod it lacks, the counters ConfigMap; and a real
exporter process labelling series with pod labels and UIDs and reading its counters from a ConfigMap."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.core_v1 import ConfigMap
from lightkube.resources.core_v1 import Pod as KubePod

from kubegpu.gpu import profiles
from kubegpu.monitoring import kubernetes, podmeta
from tests.kubeapi.fixture import KubeEnv
from tests.monitoring import exposition
from tests.monitoring.exporter_process import ExporterProcess, scrape
from tests.monitoring.podresources_server import ListerServer, Pod
from tests.polling import eventually

pytestmark = pytest.mark.live_scheduler

T4 = profiles.load("pcie-4xt4")


def _create_pod(kube: KubeEnv, name: str, node: str, labels: dict[str, str]) -> str:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    spec = {"nodeName": node, "containers": [{"name": "main", "image": "x"}]}
    pod = kube.client().create(KubePod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}))
    assert pod.metadata is not None and pod.metadata.uid
    return pod.metadata.uid


def _create_configmap(kube: KubeEnv, name: str, data: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    kube.client().create(ConfigMap.from_dict(body))


async def test_the_cache_holds_this_nodes_pods_with_uid_and_allowed_labels(kube: KubeEnv) -> None:
    mine, other = kube.name("mine"), kube.name("other")
    uid = _create_pod(kube, "here", mine, {"app.kubernetes.io/name": "trainer", "secret-ish": "no"})
    _create_pod(kube, "there", other, {"app.kubernetes.io/name": "x"})
    cache = kubernetes.NodePods(mine, kube.async_client(), podmeta.compile_allowlist(["^app"]))
    cache.start()
    try:
        await eventually(lambda: cache.synced.is_set(), within=10, what="the first list")
        assert set(cache.pods) == {(kube.namespace, "here")}
        assert cache.pods[(kube.namespace, "here")] == podmeta.PodMeta(uid, (("app_kubernetes_io_name", "trainer"),))
        later = _create_pod(kube, "later", mine, {"app": "b"})
        await eventually(
            lambda: cache.pods.get((kube.namespace, "later")) == podmeta.PodMeta(later, (("app", "b"),)),
            within=10,
            what="the watch delivering the new pod",
        )
        kube.client().delete(KubePod, "here", grace_period=0)
        await eventually(lambda: (kube.namespace, "here") not in cache.pods, within=10, what="the deletion")
    finally:
        await cache.stop()


async def test_a_pod_the_cache_lacks_is_fetched_in_the_background(kube: KubeEnv) -> None:
    # The node name guessed wrong (no NODE_NAME): the list is empty, yet the kubelet's pods get their labels.
    uid = _create_pod(kube, "elsewhere", kube.name("real-node"), {"team": "ml"})
    cache = kubernetes.NodePods(kube.name("guessed"), kube.async_client())
    cache.start()
    try:
        await eventually(lambda: cache.synced.is_set(), within=10, what="the first list")
        assert cache.lookup(kube.namespace, "elsewhere") is None  # never waits: the answer comes later
        await eventually(
            lambda: cache.lookup(kube.namespace, "elsewhere") == podmeta.PodMeta(uid, (("team", "ml"),)),
            within=10,
            what="the background GET",
        )
        assert cache.lookup(kube.namespace, "no-such-pod") is None
        await eventually(lambda: cache.fetches == 2, within=10, what="the GET of the missing pod")
        assert cache.lookup(kube.namespace, "no-such-pod") is None and cache.fetches == 2  # not asked again at once
    finally:
        await cache.stop()


async def test_the_configmap_metrics_key_is_read_and_its_absence_named(kube: KubeEnv) -> None:
    _create_configmap(kube, "counters", {"metrics": "DCGM_FI_DEV_GPU_TEMP, gauge, T.\n"})
    _create_configmap(kube, "wrong-key", {"default-counters.csv": "DCGM_FI_DEV_GPU_TEMP, gauge, T.\n"})
    client = kube.async_client()
    try:
        assert (
            await kubernetes.read_configmap(client, kube.namespace, "counters") == "DCGM_FI_DEV_GPU_TEMP, gauge, T.\n"
        )
        with pytest.raises(
            kubernetes.ConfigMapUnavailable, match=f"ConfigMap {kube.namespace}:wrong-key: no 'metrics'"
        ):
            await kubernetes.read_configmap(client, kube.namespace, "wrong-key")
        with pytest.raises(kubernetes.ConfigMapUnavailable, match="cannot read it: 404"):
            await kubernetes.read_configmap(client, kube.namespace, "absent")
    finally:
        await client.close()


def _exporter_args(tmp_path: Path, kube: KubeEnv, *extra: str) -> list[str]:
    return [
        "--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "--collect-interval", "200",
        "--kubeconfig", str(kube.kubeconfig), *extra,
    ]  # fmt: skip


async def test_the_exporter_labels_series_with_the_pods_labels_and_uid(
    kube: KubeEnv, tmp_path: Path, sock_dir: Path
) -> None:
    node = kube.name("gpu-node")
    uid = _create_pod(kube, "train", node, {"app.kubernetes.io/name": "trainer", "team": "ml", "gpu": "clash"})
    socket = sock_dir / "pod-resources.sock"
    args = _exporter_args(
        tmp_path, kube, "--pod-resources-kubelet-socket", str(socket), "--kubernetes-enable-pod-labels",
        "--kubernetes-enable-pod-uid", "--kubernetes-pod-label-allowlist-regex", "^app,^gpu$",
    )  # fmt: skip
    async with ListerServer(socket) as lister:
        lister.pods = [Pod(kube.namespace, "train", {"main": [("nvidia.com/gpu", [T4.gpus[1].uuid])]})]
        exporter = await asyncio.to_thread(ExporterProcess(args, env={"NODE_NAME": node}).start)
        try:

            async def labelled() -> dict[str, str] | None:
                page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
                held = [s.labels for s in page.named("DCGM_FI_DEV_GPU_TEMP") if "pod_uid" in s.labels]
                return held[0] if held else None

            labels = await eventually(labelled, within=20, what="a series with the pod's UID")
        finally:
            await asyncio.to_thread(exporter.stop)
    assert labels["gpu"] == "1" and labels["pod_uid"] == uid and labels["pod"] == "train"
    assert labels["app_kubernetes_io_name"] == "trainer" and "team" not in labels  # the allowlist
    assert 'msg="watching the node\'s pods for pod labels"' in "".join(exporter.stderr_lines)


async def test_counters_come_from_the_configmap_and_a_sighup_reads_it_again(kube: KubeEnv, tmp_path: Path) -> None:
    _create_configmap(kube, "exporter-metrics", {"metrics": "DCGM_FI_DEV_GPU_TEMP, gauge, Temperature.\n"})
    csv = tmp_path / "file.csv"
    csv.write_text("DCGM_FI_DEV_POWER_USAGE, gauge, Power.\n")
    args = _exporter_args(tmp_path, kube, "-f", str(csv), "-m", f"{kube.namespace}:exporter-metrics")
    exporter = await asyncio.to_thread(ExporterProcess(args).start)
    try:
        names = exposition.parse(await asyncio.to_thread(scrape, exporter.url)).names()
        assert "DCGM_FI_DEV_GPU_TEMP" in names and "DCGM_FI_DEV_POWER_USAGE" not in names
        cm = kube.client().get(ConfigMap, "exporter-metrics")
        cm.data = {"metrics": "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock.\n"}
        kube.client().replace(cm)
        assert exporter.proc is not None
        exporter.proc.send_signal(signal.SIGHUP)

        async def reloaded() -> bool:
            names = exposition.parse(await asyncio.to_thread(scrape, exporter.url)).names()
            return "DCGM_FI_DEV_SM_CLOCK" in names and "DCGM_FI_DEV_GPU_TEMP" not in names

        await eventually(reloaded, within=20, what="the counters of the updated ConfigMap")
    finally:
        assert await asyncio.to_thread(exporter.stop) == 0
    applied = [line for line in exporter.stderr_lines if 'msg="reload: counters file applied"' in line]
    assert applied and f"ConfigMap {kube.namespace}:exporter-metrics" in applied[-1]


async def test_a_configmap_that_cannot_be_read_falls_back_to_the_counters_file(kube: KubeEnv, tmp_path: Path) -> None:
    csv = tmp_path / "file.csv"
    csv.write_text("DCGM_FI_DEV_POWER_USAGE, gauge, Power.\n")
    args = _exporter_args(tmp_path, kube, "-f", str(csv), "-m", f"{kube.namespace}:absent")
    exporter = await asyncio.to_thread(ExporterProcess(args).start)
    try:
        names = exposition.parse(await asyncio.to_thread(scrape, exporter.url)).names()
    finally:
        await asyncio.to_thread(exporter.stop)
    log = "".join(exporter.stderr_lines)
    assert "DCGM_FI_DEV_POWER_USAGE" in names
    assert f"ConfigMap {kube.namespace}:absent: cannot read it: 404" in log
    assert f'msg="falling back to the counters file" file={csv}' in log


async def test_a_failing_list_is_logged_once_and_retried_until_the_cache_syncs(
    kube: KubeEnv, caplog: pytest.LogCaptureFixture
) -> None:
    server = kube.require_server()
    node = kube.name("flaky")
    uid = _create_pod(kube, "here", node, {"app": "a"})
    server.fail_next(3, 500, resource="pods", verb="list")
    cache = kubernetes.NodePods(node, kube.async_client())
    with caplog.at_level("INFO", logger="kubegpu.monitoring.kubernetes"):
        cache.start()
        try:
            await eventually(lambda: cache.synced.is_set(), within=20, what="the list after the faults")
        finally:
            await cache.stop()
    assert cache.pods[(kube.namespace, "here")].uid == uid
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("cannot watch the node's pods") == 1
    assert "watching the node's pods again" in messages
