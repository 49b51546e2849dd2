"""The simulated backend: discovery is the profile, faults arrive as health events, telemetry moves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubegpu.gpu import faults, profiles, simulated
from kubegpu.gpu.backend import HealthEvent, HealthEventKind
from kubegpu.gpu.simulated import SimulatedBackend


def test_discovery_is_the_profile(tmp_path: Path) -> None:
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "j")
    assert backend.discover() == profiles.load("dgx-a100")
    assert backend.name == "simulated:dgx-a100"


async def _next(events: AsyncIterator[HealthEvent]) -> HealthEvent:
    async with asyncio.timeout(5.0):
        return await anext(events)


async def test_an_appended_fault_becomes_a_health_event_promptly(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    backend = SimulatedBackend("a100-mig", fault_file=journal)
    machine = backend.discover()
    events = backend.health_events()
    pending = asyncio.ensure_future(_next(events))
    start = time.monotonic()
    faults.append(journal, faults.Fault(kind="xid", gpu=2, xid=79))
    event = await pending
    assert time.monotonic() - start < 2.0
    assert event == HealthEvent(
        kind=HealthEventKind.XID, gpu_uuid=machine.gpus[2].uuid, xid=79, message="simulated xid on GPU 2"
    )
    faults.append(journal, faults.Fault(kind="ecc-dbe", gpu=4, mig=1))
    event = await _next(events)
    mig = machine.gpus[4].mig_devices[1]
    assert (event.kind, event.gpu_uuid, event.gi_id, event.ci_id) == (
        HealthEventKind.ECC_DBE,
        machine.gpus[4].uuid,
        mig.gi_id,
        mig.ci_id,
    )
    await events.aclose()  # type: ignore[attr-defined]


async def test_a_gpu_lost_before_start_is_reported_first(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    for fault in (faults.Fault(kind="lost", gpu=1), faults.Fault(kind="lost", gpu=3), faults.Fault("recover", 1)):
        faults.append(journal, fault)
    backend = SimulatedBackend("dgx-a100", fault_file=journal)
    events = backend.health_events()
    first = await _next(events)
    assert (first.kind, first.gpu_uuid) == (HealthEventKind.LOST, backend.discover().gpus[3].uuid)
    await events.aclose()  # type: ignore[attr-defined]


async def test_faults_on_gpus_the_machine_lacks_are_ignored(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    backend = SimulatedBackend("pcie-4xt4", fault_file=journal)
    events = backend.health_events()
    faults.append(journal, faults.Fault(kind="xid", gpu=9, xid=79))
    faults.append(journal, faults.Fault(kind="xid", gpu=0, xid=48, mig=3))
    faults.append(journal, faults.Fault(kind="xid", gpu=3, xid=79))
    event = await _next(events)
    assert event.gpu_uuid == backend.discover().gpus[3].uuid
    await events.aclose()  # type: ignore[attr-defined]


def test_telemetry_is_plausible_and_changes_over_time(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    backend = SimulatedBackend("dgx-a100", fault_file=tmp_path / "j", clock=lambda: now[0])
    first = backend.sample()
    now[0] += 30.0
    second = backend.sample()
    assert len(first.gpus) == 8
    for gpu, a, b in zip(backend.discover().gpus, first.gpus, second.gpus, strict=True):
        assert a.uuid == gpu.uuid and a.available
        assert a.gpu_util_pct is not None and 0 <= a.gpu_util_pct <= 100
        assert a.fb_used_mib is not None and a.fb_free_mib is not None and a.fb_reserved_mib is not None
        assert a.fb_used_mib + a.fb_free_mib + a.fb_reserved_mib == gpu.memory_mib
        assert a.power_w is not None and 0 < a.power_w <= gpu.power_limit_w
        assert a.total_energy_mj is not None and b.total_energy_mj is not None
        assert b.total_energy_mj > a.total_energy_mj
    assert [g.gpu_util_pct for g in first.gpus] != [g.gpu_util_pct for g in second.gpus]
    assert len({g.gpu_util_pct for g in first.gpus}) > 1


def test_telemetry_reflects_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    backend = SimulatedBackend("a100-mig", fault_file=journal)
    faults.append(journal, faults.Fault(kind="xid", gpu=5, xid=79))
    faults.append(journal, faults.Fault(kind="ecc-dbe", gpu=5))
    faults.append(journal, faults.Fault(kind="lost", gpu=6))
    sample = backend.sample()
    assert sample.gpus[5].xid_last == 79 and sample.gpus[5].ecc_dbe_volatile_total == 1
    assert sample.gpus[0].xid_last == 0
    assert not sample.gpus[6].available
    assert [len(g.mig) for g in sample.gpus] == [0, 0, 7, 7, 4, 2, 0, 1]


async def test_a_fault_wakes_the_reader_through_inotify_not_the_slow_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simulated, "WATCHED_POLL_INTERVAL_S", 3600.0)  # only inotify can deliver within the test
    monkeypatch.setattr(simulated, "POLL_INTERVAL_S", 3600.0)
    journal = tmp_path / "j"
    backend = SimulatedBackend("dgx-a100", fault_file=journal)
    events = backend.health_events()
    pending = asyncio.ensure_future(_next(events))
    (tmp_path / "unrelated").write_text("x")  # another file of the directory is no fault
    done, _ = await asyncio.wait({pending}, timeout=0.2)  # nothing to tell; the reader parks on its wait
    assert not done
    faults.append(journal, faults.Fault(kind="xid", gpu=1, xid=48))
    assert (await pending).xid == 48
    await events.aclose()  # type: ignore[attr-defined]


async def test_a_journal_whose_directory_is_missing_is_polled_and_its_faults_still_arrive(tmp_path: Path) -> None:
    journal = tmp_path / "later" / "j"
    backend = SimulatedBackend("dgx-a100", fault_file=journal)
    events = backend.health_events()
    pending = asyncio.ensure_future(_next(events))
    done, _ = await asyncio.wait({pending}, timeout=0.05)  # the reader has started, without a directory to watch
    assert not done
    journal.parent.mkdir()
    faults.append(journal, faults.Fault(kind="xid", gpu=3, xid=79))
    event = await pending
    assert (event.kind, event.xid) == (HealthEventKind.XID, 79)
    await events.aclose()  # type: ignore[attr-defined]
