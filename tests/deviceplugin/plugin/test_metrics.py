"""The plugin's own metrics: a running ``kubegpu plugin --metrics-listen`` scraped over HTTP, checked against the
README table the alert rules are written from; and metrics off by default cost nothing."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.demo.localnode import free_port
from kubegpu.deviceplugin.plugin.metrics import RPC_BUCKETS, PluginMetrics
from kubegpu.gpu import faults, profiles
from tests.conftest import REPO
from tests.deviceplugin.fake_kubelet import FakeKubelet

DEADLINE_S = 30.0
UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]


def readme_table() -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (type, labels) of every plugin metric in README's monitoring section."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("<!-- section:monitoring -->") : text.index("<!-- /section:monitoring -->")]
    rows = re.findall(r"^\| `(kubegpu_plugin_\w+)` \| (\w+) \| ([^|]*) \|", section, re.MULTILINE)
    return {name: (kind, frozenset(re.findall(r"`(\w+)`", labels))) for name, kind, labels in rows}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


@pytest.fixture
async def plugin(sock_dir: Path, kubelet: FakeKubelet, fault_file: Path) -> AsyncIterator[tuple[int, FakeKubelet]]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "kubegpu", "plugin", "--machine", "dgx-a100", "--fault-file", str(fault_file)),
        *("--kubelet-socket", str(sock_dir / "kubelet.sock"), "--metrics-listen", f"127.0.0.1:{port}"),
        *("--health-recovery-quiet-period", "0"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield port, kubelet
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), DEADLINE_S)


async def test_a_running_plugin_serves_exactly_the_readme_metrics_with_their_labels(
    plugin: tuple[int, FakeKubelet], fault_file: Path
) -> None:
    port, kubelet = plugin
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 8)
    stub = kubelet.stub(entry)
    ok = api_pb2.AllocateRequest(
        container_requests=[
            api_pb2.ContainerAllocateRequest(devices_ids=[UUIDS[0]]),
            api_pb2.ContainerAllocateRequest(devices_ids=[UUIDS[1]]),
        ]
    )
    await stub.Allocate(ok, timeout=DEADLINE_S)
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.Allocate(
            api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["GPU-x"])]),
            timeout=DEADLINE_S,
        )
    await stub.GetPreferredAllocation(
        api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=UUIDS, allocation_size=2)
            ]
        ),
        timeout=DEADLINE_S,
    )
    await stub.PreStartContainer(api_pb2.PreStartContainerRequest(), timeout=DEADLINE_S)
    faults.append(fault_file, faults.Fault(kind="xid", gpu=4, xid=79))
    await kubelet.wait_snapshot(entry, lambda h: h[UUIDS[4]] == "Unhealthy", DEADLINE_S)
    faults.append(fault_file, faults.Fault(kind="recover", gpu=4))
    await kubelet.wait_snapshot(entry, lambda h: h[UUIDS[4]] == "Healthy", DEADLINE_S)

    text = await asyncio.to_thread(scrape, port)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    table = readme_table()
    # prometheus_client names counter families without _total
    served = {(name + "_total" if f.type == "counter" else name): f for name, f in families.items()}
    assert set(served) == set(table)
    for name, (kind, labels) in table.items():
        family = served[name]
        assert family.type == kind, name
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample)

    def value(sample_name: str, **labels: str) -> float:
        (found,) = [
            s.value
            for f in families.values()
            for s in f.samples
            if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        return found

    gpu = "nvidia.com/gpu"
    assert value("kubegpu_plugin_registrations_total", resource=gpu) == 1
    assert value("kubegpu_plugin_allocations_total", resource=gpu) == 2
    assert value("kubegpu_plugin_allocation_errors_total", resource=gpu) == 1
    assert value("kubegpu_plugin_devices", resource=gpu, health="Healthy") == 8
    assert value("kubegpu_plugin_devices", resource=gpu, health="Unhealthy") == 0
    assert value("kubegpu_plugin_device_health", resource=gpu, device=UUIDS[4], health="Healthy") == 1
    assert value("kubegpu_plugin_device_health", resource=gpu, device=UUIDS[4], health="Unhealthy") == 0
    assert value("kubegpu_plugin_health_transitions_total", resource=gpu, health="Unhealthy", xid="79") == 1
    assert value("kubegpu_plugin_health_transitions_total", resource=gpu, health="Healthy", xid="none") == 1
    assert value("kubegpu_plugin_rpc_duration_seconds_count", method="Allocate") == 2
    assert value("kubegpu_plugin_rpc_duration_seconds_count", method="GetPreferredAllocation") >= 1
    timed = {s.labels["method"] for s in families["kubegpu_plugin_rpc_duration_seconds"].samples}
    assert timed == {"Allocate", "GetPreferredAllocation"}  # the RPCs that answer constants are not timed
    buckets = {
        s.labels["le"] for s in families["kubegpu_plugin_rpc_duration_seconds"].samples if s.name.endswith("_bucket")
    }
    assert buckets == {str(b) for b in RPC_BUCKETS} | {"+Inf"}
    checked = await asyncio.to_thread(
        subprocess.run, ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_unhealthy_device_is_one_on_its_unhealthy_series_only() -> None:
    metrics = PluginMetrics(enabled=True)
    metrics.advertise({"nvidia.com/gpu": ["GPU-a", "GPU-b"]}, {"nvidia.com/gpu": ["GPU-b"]})
    samples = {
        (s.labels.get("device"), s.labels["health"]): s.value
        for f in metrics.registry.collect()
        if f.name in ("kubegpu_plugin_device_health", "kubegpu_plugin_devices")
        for s in f.samples
    }
    assert samples == {
        ("GPU-a", "Healthy"): 1,
        ("GPU-a", "Unhealthy"): 0,
        ("GPU-b", "Healthy"): 0,
        ("GPU-b", "Unhealthy"): 1,
        (None, "Healthy"): 1,
        (None, "Unhealthy"): 1,
    }


def test_resources_no_longer_served_lose_their_series() -> None:
    metrics = PluginMetrics(enabled=True)
    metrics.advertise({"nvidia.com/gpu": ["GPU-a"], "nvidia.com/mig-1g.10gb": ["MIG-a"]}, {})
    metrics.advertise({"nvidia.com/gpu.shared": ["GPU-a::0"]}, {})
    resources = {s.labels["resource"] for f in metrics.registry.collect() for s in f.samples if "resource" in s.labels}
    assert resources == {"nvidia.com/gpu.shared"}


def test_metrics_off_by_default_do_not_even_import_prometheus_client() -> None:
    code = (
        "import sys\n"
        "from kubegpu.deviceplugin.plugin import supervisor, metrics\n"
        "m = metrics.PluginMetrics()\n"
        "m.advertise({'nvidia.com/gpu': ['GPU-a']}, {}); m.registered('nvidia.com/gpu'); m.rpc('Allocate', 0.1)\n"
        "assert 'prometheus_client' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_metrics_port_in_use_exits_one_naming_it(sock_dir: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [
                *(sys.executable, "-m", "kubegpu", "plugin", "--machine", "pcie-4xt4"),
                *("--metrics-listen", f"127.0.0.1:{port}", "--kubelet-socket", str(sock_dir / "kubelet.sock")),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert 'msg="cannot serve metrics"' in done.stderr and f"127.0.0.1:{port}" in done.stderr
