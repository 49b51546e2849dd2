"""The collector: sampled pages with pod labels, and what happens when the GPUs or the kubelet fail."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

from kubegpu.gpu import faults
from kubegpu.gpu.model import Machine
from kubegpu.gpu.simulated import SimulatedBackend
from kubegpu.gpu.telemetry import MachineSample
from kubegpu.monitoring import counters, render
from kubegpu.monitoring.collector import Collector
from kubegpu.monitoring.podresources import PodResourcesClient
from tests.monitoring import exposition
from tests.monitoring.podresources_server import ListerServer, Pod
from tests.polling import eventually

DEFAULT = counters.parse(counters.default_text())
OPTIONS = render.LabelOptions(hostname="node-1")


class BrokenGpus(SimulatedBackend):
    """A simulated machine whose telemetry read fails while ``broken`` is set (a driver hiccup)."""

    broken = False

    def sample(self) -> MachineSample:
        if self.broken:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return super().sample()


def page(collector: Collector) -> exposition.Exposition:
    return exposition.parse(collector.page.body.decode())


async def test_a_collection_renders_every_gpu_and_the_exporter_stats(tmp_path: Path) -> None:
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), DEFAULT, OPTIONS)
    assert collector.health_problem == "no collection yet"
    await collector.collect_once()
    out = page(collector)
    assert len(out.named("DCGM_FI_DEV_GPU_UTIL")) == 8
    assert out.named("kubegpu_exporter_collect_errors_total")[0].value == 0
    assert out.named("kubegpu_exporter_last_collect_timestamp_seconds")[0].value > 0
    assert out.named("kubegpu_exporter_pod_resources_up") == []
    assert collector.health_problem is None
    assert gzip.decompress(collector.page.gzipped) == collector.page.body


async def test_pages_follow_the_fault_journal(tmp_path: Path) -> None:
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), DEFAULT, OPTIONS)
    await collector.collect_once()
    faults.append(tmp_path / "f.jsonl", faults.Fault(kind="xid", gpu=2, xid=48))
    await collector.collect_once()
    xids = {s.labels["gpu"]: s.value for s in page(collector).named("DCGM_FI_DEV_XID_ERRORS")}
    assert xids["2"] == 48 and sum(xids.values()) == 48


async def test_a_failed_telemetry_read_keeps_the_last_series_counts_the_error_and_fails_health(tmp_path: Path) -> None:
    backend = BrokenGpus("pcie-4xt4", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), DEFAULT, OPTIONS)
    await collector.collect_once()
    before = page(collector).named("DCGM_FI_DEV_GPU_TEMP")
    backend.broken = True
    await collector.collect_once()
    out = page(collector)
    assert out.named("DCGM_FI_DEV_GPU_TEMP") == before
    assert out.named("kubegpu_exporter_collect_errors_total")[0].value == 1
    assert collector.health_problem == "telemetry read failed: NVML_ERROR_UNKNOWN"
    backend.broken = False
    await collector.collect_once()
    assert collector.health_problem is None


async def test_pod_labels_come_from_the_kubelets_pod_resources(tmp_path: Path, sock_dir: Path) -> None:
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "f.jsonl")
    machine: Machine = backend.discover()
    async with ListerServer(sock_dir / "kubelet.sock") as lister:
        lister.pods = [
            Pod("ml", "train", {"main": [("nvidia.com/gpu", [machine.gpus[4].uuid, machine.gpus[5].uuid])]}),
            Pod("ml", "other", {"main": [("example.com/gpu", [machine.gpus[0].uuid])]}),
        ]
        collector = Collector(backend, machine, DEFAULT, OPTIONS, pods=PodResourcesClient(sock_dir / "kubelet.sock"))
        await collector.collect_once()
        out = page(collector)
        labelled = {s.labels["gpu"]: s.labels for s in out.named("DCGM_FI_DEV_FB_USED") if "pod" in s.labels}
        assert set(labelled) == {"4", "5"}
        assert {(x["namespace"], x["pod"], x["container"]) for x in labelled.values()} == {("ml", "train", "main")}
        assert out.named("kubegpu_exporter_pod_resources_up")[0].value == 1

        lister.pods = []  # the pod ended
        await collector.collect_once()
        assert not any("pod" in s.labels for s in page(collector).samples)
        await collector.close()


async def test_without_the_kubelet_series_lose_pod_labels_and_pod_resources_is_down(
    tmp_path: Path, sock_dir: Path
) -> None:
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "f.jsonl")
    client = PodResourcesClient(sock_dir / "kubelet.sock", timeout_s=2)
    collector = Collector(backend, backend.discover(), DEFAULT, OPTIONS, pods=client)
    await collector.collect_once()
    out = page(collector)
    assert out.named("kubegpu_exporter_pod_resources_up")[0].value == 0
    assert len(out.named("DCGM_FI_DEV_GPU_TEMP")) == 8
    assert collector.health_problem is None  # GPU metrics are fine; attribution is reported by its own gauge
    await collector.close()


async def test_run_collects_on_the_interval_until_stopped(tmp_path: Path) -> None:
    backend = SimulatedBackend("pcie-4xt4", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), DEFAULT, OPTIONS)
    stop = asyncio.Event()
    task = asyncio.create_task(collector.run(0.05, stop))
    await eventually(lambda: collector.page.generation >= 3, within=8, what="three collections")
    stop.set()
    await asyncio.wait_for(task, timeout=10)
    assert collector.page.generation >= 3
