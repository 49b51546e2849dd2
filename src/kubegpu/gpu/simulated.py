"""The simulated backend: a machine profile brought to life.

Owns turning a profile into a running backend: discovery returns the profile's
machine, health events come from the machine's fault journal
(:mod:`kubegpu.gpu.faults`; read when inotify says its directory changed, with a
slow poll behind it, so an idle plugin's event loop stays idle), telemetry is plausible and changes over time
(smooth per-GPU curves, deterministic for a given GPU and instant). Must not
implement health policy and must not import anything outside :mod:`kubegpu.gpu`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubegpu.gpu import faults, profiles
from kubegpu.gpu.backend import HealthEvent, HealthEventKind
from kubegpu.gpu.model import Gpu, Machine

if TYPE_CHECKING:
    # Imported where a sample is taken: the device plugin never samples, and its start need not pay for it.
    from kubegpu.gpu.telemetry import GpuSample, MachineSample

log = logging.getLogger(__name__)

#: How often the fault journal is checked for new lines when inotify is unavailable (seconds).
POLL_INTERVAL_S = 0.01
#: How often it is checked anyway with inotify watching (events lost to a full queue, odd filesystems).
WATCHED_POLL_INTERVAL_S = 1.0

_KIND = {
    "xid": HealthEventKind.XID,
    "ecc-dbe": HealthEventKind.ECC_DBE,
    "ecc-sbe": HealthEventKind.ECC_SBE,
    "lost": HealthEventKind.LOST,
    "recover": HealthEventKind.RECOVERED,
}


class SimulatedBackend:
    """A backend over a shipped (or file) machine profile and its fault journal.

    Parameters:
        profile: shipped profile name or a profile/canonical JSON path.
        fault_file: the machine's fault journal; defaults to ``faults.default_path(name)``.
        clock: wall clock for telemetry (injectable for tests).
    """

    def __init__(
        self,
        profile: str | Machine,
        fault_file: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._machine = profile if isinstance(profile, Machine) else profiles.load(profile)
        self.fault_file = fault_file if fault_file is not None else faults.default_path(self._machine.name)
        self._clock = clock
        self._boot = clock() - 86400.0  # "booted a day ago": energy counters start non-zero
        # Faults written before the backend existed are lasting state, not events; anything later is an event,
        # even if it lands before the first health_events() iteration.
        self._start_offset = faults.read_from(self.fault_file, 0)[1]

    @property
    def name(self) -> str:
        return f"simulated:{self._machine.name}"

    def discover(self) -> Machine:
        return self._machine

    def close(self, wait: bool = True) -> None:
        return None

    def _event(self, fault: faults.Fault) -> HealthEvent | None:
        if not 0 <= fault.gpu < len(self._machine.gpus):
            return None
        gpu = self._machine.gpus[fault.gpu]
        gi_id = ci_id = None
        if fault.mig is not None:
            if not 0 <= fault.mig < len(gpu.mig_devices):
                return None
            gi_id, ci_id = gpu.mig_devices[fault.mig].gi_id, gpu.mig_devices[fault.mig].ci_id
        return HealthEvent(
            kind=_KIND[fault.kind],
            gpu_uuid=gpu.uuid,
            xid=fault.xid,
            gi_id=gi_id,
            ci_id=ci_id,
            message=f"simulated {fault.kind} on GPU {fault.gpu}",
        )

    async def health_events(self) -> AsyncIterator[HealthEvent]:
        """Lost GPUs first (lasting state), then every fault appended after the backend was created."""
        before, offset = faults.read_from(self.fault_file, 0, end=self._start_offset)
        for index in sorted(faults.fold(before).lost):
            event = self._event(faults.Fault(kind="lost", gpu=index))
            if event is not None:
                yield event
        with contextlib.ExitStack() as stack:
            inotify = self._watch_journal(stack)
            while True:
                new, offset = faults.read_from(self.fault_file, offset)
                for fault in new:
                    event = self._event(fault)
                    if event is not None:
                        yield event
                if inotify is None:
                    await asyncio.sleep(POLL_INTERVAL_S)
                    continue
                await self._journal_changed(inotify)

    async def _journal_changed(self, inotify: Any) -> None:
        """Return when the journal was written (or created, or replaced), or after the watched poll interval."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WATCHED_POLL_INTERVAL_S):
                while True:
                    event = await inotify.get()
                    if event.name is not None and str(event.name) == self.fault_file.name:
                        return

    def _watch_journal(self, stack: contextlib.ExitStack) -> Any:
        """An inotify watch on the journal's directory (entered on ``stack``), or None to poll instead."""
        try:
            from kubegpu.common.inotify import Inotify, Mask

            inotify = stack.enter_context(Inotify())
            inotify.add_watch(self.fault_file.parent, Mask.MODIFY | Mask.CREATE | Mask.MOVED_TO | Mask.CLOSE_WRITE)
        except (ImportError, OSError) as exc:
            log.debug("fault journal polled", extra={"journal": str(self.fault_file), "reason": str(exc)})
            return None
        return inotify

    def sample(self) -> MachineSample:
        from kubegpu.gpu.telemetry import MachineSample

        now = self._clock()
        state = faults.fold(faults.read_from(self.fault_file, 0)[0])
        return MachineSample(
            timestamp=now,
            gpus=tuple(self._sample_gpu(g, now, state) for g in self._machine.gpus),
        )

    def _sample_gpu(self, gpu: Gpu, now: float, state: faults.MachineState) -> GpuSample:
        from kubegpu.gpu.telemetry import GpuSample, MigSample

        if gpu.index in state.lost:
            return GpuSample(uuid=gpu.uuid, index=gpu.index, available=False)
        phase = (zlib.crc32(gpu.uuid.encode()) % 1000) / 1000.0 * 2 * math.pi

        def wave(period: float, shift: float = 0.0) -> float:
            """A smooth value in 0..1 that changes over time, different per GPU."""
            return 0.5 + 0.5 * math.sin(2 * math.pi * now / period + phase + shift)

        util = round(100 * (0.15 + 0.8 * wave(97.0)), 1)
        fb_total = float(gpu.memory_mib)
        fb_reserved = round(min(fb_total * 0.01, 1024.0))
        fb_used = round((fb_total - fb_reserved) * (0.05 + 0.85 * wave(131.0, 1.0)))
        power = round(gpu.power_limit_w * (0.2 + 0.7 * util / 100.0), 3)
        uptime = now - self._boot
        energy_mj = round(uptime * gpu.power_limit_w * 0.45 * 1000.0)
        sbe = state.ecc_sbe.get(gpu.index, 0)
        dbe = state.ecc_dbe.get(gpu.index, 0)
        migs = tuple(
            MigSample(
                uuid=m.uuid,
                parent_uuid=gpu.uuid,
                gi_id=m.gi_id,
                ci_id=m.ci_id,
                profile=m.profile,
                fb_total_mib=float(m.memory_mib),
                fb_used_mib=float(round(m.memory_mib * (0.1 + 0.8 * wave(113.0, m.index)))),
                fb_free_mib=float(m.memory_mib - round(m.memory_mib * (0.1 + 0.8 * wave(113.0, m.index)))),
                gr_engine_active=round(0.1 + 0.8 * wave(89.0, m.index), 4),
                sm_active=round(0.1 + 0.7 * wave(89.0, m.index), 4),
                tensor_active=round(0.05 + 0.5 * wave(71.0, m.index), 4),
                dram_active=round(0.05 + 0.6 * wave(61.0, m.index), 4),
            )
            for m in gpu.mig_devices
        )
        return GpuSample(
            uuid=gpu.uuid,
            index=gpu.index,
            gpu_util_pct=util,
            mem_copy_util_pct=round(util * 0.6, 1),
            enc_util_pct=0.0,
            dec_util_pct=0.0,
            fb_used_mib=float(fb_used),
            fb_free_mib=float(fb_total - fb_reserved - fb_used),
            fb_reserved_mib=float(fb_reserved),
            fb_total_mib=fb_total,
            gpu_temp_c=round(32 + 45 * util / 100.0),
            memory_temp_c=round(36 + 40 * util / 100.0),
            power_w=power,
            power_limit_w=gpu.power_limit_w,
            total_energy_mj=float(energy_mj),
            sm_clock_mhz=float(round(gpu.max_sm_clock_mhz * (0.7 + 0.3 * util / 100.0))),
            mem_clock_mhz=float(gpu.max_mem_clock_mhz),
            pcie_tx_bytes_per_s=float(round(2e9 * wave(53.0, 2.0))),
            pcie_rx_bytes_per_s=float(round(3e9 * wave(59.0, 3.0))),
            pcie_replay_total=0.0,
            xid_last=state.last_xid.get(gpu.index, 0),
            ecc_sbe_volatile_total=float(sbe),
            ecc_dbe_volatile_total=float(dbe),
            ecc_sbe_aggregate_total=float(sbe),
            ecc_dbe_aggregate_total=float(dbe),
            retired_pages_sbe=0.0,
            retired_pages_dbe=float(dbe),
            retired_pages_pending=0.0,
            remapped_rows_correctable=float(sbe),
            remapped_rows_uncorrectable=float(dbe),
            row_remap_failure=0.0,
            nvlink_bandwidth_total=float(round(uptime * 1e9 * 0.3)),
            power_violation_ns=0.0,
            thermal_violation_ns=0.0,
            gr_engine_active=round(util / 100.0, 4),
            sm_active=round(util / 100.0 * 0.9, 4),
            sm_occupancy=round(util / 100.0 * 0.6, 4),
            tensor_active=round(util / 100.0 * 0.5, 4),
            dram_active=round(util / 100.0 * 0.4, 4),
            fp64_active=0.0,
            fp32_active=round(util / 100.0 * 0.3, 4),
            fp16_active=round(util / 100.0 * 0.2, 4),
            vgpu_license_status=0.0,
            mig=migs,
        )
