"""The health monitor over a simulated machine and its fault journal: faults in, health out, one log line each."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubegpu.deviceplugin.plugin.monitor import HealthMonitor
from kubegpu.deviceplugin.rm import health, resource_map, resources
from kubegpu.gpu import faults
from kubegpu.gpu.backend import HealthEvent
from kubegpu.gpu.simulated import SimulatedBackend
from tests.deviceplugin.fixtures.build import plugin_config
from tests.polling import eventually

DEADLINE_S = 10.0


class Sink:
    """Records what the monitor pushes, as a resource server would show it."""

    def __init__(self, resource: resources.Resource) -> None:
        self.resource = resource
        self.pushed: list[set[str]] = []
        self.changed = asyncio.Event()

    def set_unhealthy(self, device_ids: set[str]) -> None:
        self.pushed.append(set(device_ids))
        self.changed.set()

    async def until(self, expected: set[str]) -> None:
        async with asyncio.timeout(DEADLINE_S):
            while not self.pushed or self.pushed[-1] != expected:
                self.changed.clear()
                await self.changed.wait()


async def run_monitor(fault_file: Path, quiet: float | None = None) -> tuple[HealthMonitor, Sink, list[str]]:
    backend = SimulatedBackend("dgx-a100", fault_file=fault_file)
    machine = backend.discover()
    served = resource_map.build(machine, plugin_config()).resources
    monitor = HealthMonitor(backend, served, health.HealthBook(quiet_period_s=quiet))
    sink = Sink(served[0])
    monitor.attach(sink)
    monitor.start()  # the backend reads its journal from where it stood when it was made: nothing to wait for
    return monitor, sink, [g.uuid for g in machine.gpus]


@pytest.fixture
async def monitored(fault_file: Path) -> AsyncIterator[tuple[HealthMonitor, Sink, list[str]]]:
    monitor, sink, uuids = await run_monitor(fault_file)
    try:
        yield monitor, sink, uuids
    finally:
        await monitor.stop()


async def test_an_injected_xid_marks_the_gpu_and_recovery_heals_it(
    fault_file: Path, monitored: tuple[HealthMonitor, Sink, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    _, sink, uuids = monitored
    assert sink.pushed == [set()]  # attach pushes the current state at once
    with caplog.at_level(logging.INFO, logger="kubegpu.deviceplugin.plugin.monitor"):
        faults.append(fault_file, faults.Fault(kind="xid", gpu=2, xid=79))
        await sink.until({uuids[2]})
        faults.append(fault_file, faults.Fault(kind="recover", gpu=2))
        await sink.until(set())
    unhealthy = [r for r in caplog.records if r.getMessage() == "device unhealthy"]
    healthy = [r for r in caplog.records if r.getMessage() == "device healthy"]
    assert len(unhealthy) == len(healthy) == 1
    assert (unhealthy[0].xid, unhealthy[0].meaning, unhealthy[0].device) == (  # type: ignore[attr-defined]
        79,
        "GPU has fallen off the bus",
        uuids[2],
    )
    assert healthy[0].healed_by == "recovered"  # type: ignore[attr-defined]


async def test_application_xids_are_logged_and_ignored(
    fault_file: Path, monitored: tuple[HealthMonitor, Sink, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    _, sink, uuids = monitored
    with caplog.at_level(logging.INFO, logger="kubegpu.deviceplugin.plugin.monitor"):
        faults.append(fault_file, faults.Fault(kind="xid", gpu=1, xid=13))
        faults.append(fault_file, faults.Fault(kind="ecc-dbe", gpu=6))
        await sink.until({uuids[6]})
    assert all(p <= {uuids[6]} for p in sink.pushed)
    ignored = [r for r in caplog.records if r.getMessage() == "xid ignored"]
    assert [(r.xid, r.meaning) for r in ignored] == [(13, "graphics engine exception")]  # type: ignore[attr-defined]


async def test_a_lost_gpu_stays_unhealthy_until_recovered(
    fault_file: Path, monitored: tuple[HealthMonitor, Sink, list[str]]
) -> None:
    monitor, sink, uuids = monitored
    faults.append(fault_file, faults.Fault(kind="lost", gpu=4))
    await sink.until({uuids[4]})
    assert monitor.book.next_expiry() is None
    faults.append(fault_file, faults.Fault(kind="recover", gpu=4))
    await sink.until(set())


async def test_a_quiet_period_heals_without_a_recovery_event(
    fault_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monitor, sink, uuids = await run_monitor(fault_file, quiet=0.3)
    try:
        with caplog.at_level(logging.INFO, logger="kubegpu.deviceplugin.plugin.monitor"):
            faults.append(fault_file, faults.Fault(kind="xid", gpu=0, xid=48))
            await sink.until({uuids[0]})
            await sink.until(set())
        healthy = [r for r in caplog.records if r.getMessage() == "device healthy"]
        assert [r.healed_by for r in healthy] == ["quiet period"]  # type: ignore[attr-defined]
    finally:
        await monitor.stop()


async def test_a_gpu_lost_before_the_plugin_started_is_unhealthy_from_the_start(fault_file: Path) -> None:
    faults.append(fault_file, faults.Fault(kind="lost", gpu=7))
    monitor, sink, uuids = await run_monitor(fault_file)
    try:
        await sink.until({uuids[7]})
    finally:
        await monitor.stop()


async def test_a_server_attached_later_gets_the_current_health(
    fault_file: Path, monitored: tuple[HealthMonitor, Sink, list[str]]
) -> None:
    monitor, sink, uuids = monitored
    faults.append(fault_file, faults.Fault(kind="xid", gpu=3, xid=79))
    await sink.until({uuids[3]})
    monitor.detach(sink)
    later = Sink(sink.resource)
    monitor.attach(later)
    assert later.pushed == [{uuids[3]}]


class _BrokenBackend:
    name = "broken"

    async def health_events(self) -> AsyncIterator[HealthEvent]:
        raise OSError("event wait failed")
        yield  # pragma: no cover


async def test_a_failing_event_source_stops_health_checks_loudly_but_not_the_plugin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine = SimulatedBackend("pcie-4xt4", fault_file=Path("/nonexistent/x")).discover()
    served = resource_map.build(machine, plugin_config()).resources
    monitor = HealthMonitor(_BrokenBackend(), served, health.HealthBook())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="kubegpu.deviceplugin.plugin.monitor"):
        monitor.start()
        await eventually(lambda: caplog.records, within=5, what="an error logged")
    assert [r.getMessage() for r in caplog.records] == ["health checks stopped"]
    await monitor.stop()


async def test_a_held_resource_is_all_unhealthy_and_its_own_faults_show_again_on_release(
    fault_file: Path, monitored: tuple[HealthMonitor, Sink, list[str]]
) -> None:
    monitor, sink, uuids = monitored
    faults.append(fault_file, faults.Fault(kind="xid", gpu=2, xid=79))
    await sink.until({uuids[2]})
    monitor.hold(sink.resource.name, "MPS daemon: gone")
    assert sink.pushed[-1] == set(uuids) == monitor.unhealthy(sink.resource.name)
    pushes = len(sink.pushed)
    monitor.hold(sink.resource.name, "MPS daemon: gone")  # the same reason again: nothing new to push
    assert len(sink.pushed) == pushes
    monitor.hold(sink.resource.name, None)
    assert sink.pushed[-1] == {uuids[2]} == monitor.unhealthy(sink.resource.name)
