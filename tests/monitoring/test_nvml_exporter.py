"""``kubegpu exporter`` on NVML: a real process reading the fake libnvidia-ml.so.1 through nvidia-ml-py.

The fake library (tests/fake_nvml) shows a machine profile as NVML would; nothing above the C library is
faked, so this is the exporter's real-GPU path: discovery, telemetry, the XID event watcher, lost GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubegpu.gpu import profiles
from tests.fake_nvml import harness
from tests.monitoring import exposition
from tests.monitoring.exporter_process import ExporterProcess, scrape
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

DGX = profiles.load("dgx-a100")


@pytest.fixture
def fake_node(tmp_path: Path) -> harness.FakeNode:
    try:
        lib = harness.library()
    except harness.NoCompiler as exc:
        pytest.skip(str(exc))
    return harness.stage(tmp_path / "node", "dgx-a100", lib)


@pytest.fixture
def exporter(fake_node: harness.FakeNode, tmp_path: Path) -> Iterator[ExporterProcess]:
    args = [
        "--driver-root",
        str(fake_node.driver_root),
        "--container-driver-root",
        str(tmp_path / "no-container-root"),
        "--collect-interval",
        "200",
    ]
    env = {**fake_node.env, "KUBEGPU_SYSFS_ROOT": str(fake_node.sysfs_root)}
    with ExporterProcess(args, env=env) as process:
        yield process


def gauge(url: str, name: str) -> dict[str, float]:
    return {s.labels["gpu"]: s.value for s in exposition.parse(scrape(url)).named(name)}


def test_nvml_gpus_are_exported_with_dcgm_labels(exporter: ExporterProcess) -> None:
    page = exposition.parse(scrape(exporter.url))
    temps = page.named("DCGM_FI_DEV_GPU_TEMP")
    assert sorted((s.labels["gpu"], s.labels["UUID"], s.labels["pci_bus_id"]) for s in temps) == sorted(
        (str(g.index), g.uuid, g.pci_bus_id) for g in DGX.gpus
    )
    assert {s.labels["modelName"] for s in temps} == {"NVIDIA A100-SXM4-80GB"}
    assert {s.labels["DCGM_FI_DRIVER_VERSION"] for s in temps} == {DGX.driver_version}
    assert len(page.named("DCGM_FI_DEV_FB_USED")) == 8
    assert "nvml:" in "".join(exporter.stderr_lines)


def test_an_nvml_xid_event_reaches_xid_errors(exporter: ExporterProcess, fake_node: harness.FakeNode) -> None:
    assert set(gauge(exporter.url, "DCGM_FI_DEV_XID_ERRORS").values()) == {0.0}
    fake_node.xid(4, 48)
    wait_until(lambda: gauge(exporter.url, "DCGM_FI_DEV_XID_ERRORS").get("4") == 48, what="XID 48 on GPU 4")


def test_a_gpu_lost_to_nvml_is_reported_unavailable(exporter: ExporterProcess, fake_node: harness.FakeNode) -> None:
    fake_node.lost(1)
    wait_until(lambda: gauge(exporter.url, "kubegpu_exporter_gpu_available").get("1") == 0, what="GPU 1 unavailable")
    assert "1" not in gauge(exporter.url, "DCGM_FI_DEV_GPU_TEMP")
