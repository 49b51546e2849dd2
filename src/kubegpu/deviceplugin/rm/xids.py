"""Health policy: which XIDs make a device unhealthy, and which advertised devices an event hits.

Owns NVIDIA's built-in "application XID" ignore list, the parsing and meaning
of ``DP_DISABLE_HEALTHCHECKS`` / ``DP_ENABLE_HEALTHCHECKS``, a table of XID
meanings for log lines, the verdict for one backend health event, and the rule
mapping an event on GPU *g* (optionally narrowed to a MIG GPU/compute instance)
to the advertised devices it makes unhealthy. Pure: no NVML, no clocks, no
ListAndWatch streams — the runtime's health loop applies these decisions.

Deliberate differences from NVIDIA (README, "NVIDIA compatibility"):
* an explicit ``DP_ENABLE_HEALTHCHECKS`` list is honoured even with
  ``DP_DISABLE_HEALTHCHECKS=all`` (NVIDIA skips health checking entirely);
* an event on a GPU marks every replica and every MIG device of that GPU
  (NVIDIA marks one, issue #1929); a MIG-scoped event also marks a whole-GPU
  device that contains the instance (NVIDIA ignores it);
* a lost GPU is unhealthy and a recovery event makes it healthy again (NVIDIA
  needs a restart);
* a double-bit ECC event marks the GPU unhealthy (NVIDIA logs non-XID events
  and acts only on XIDs): the error is uncorrectable, and waiting for the XID 48
  that usually follows it would hand the GPU to one more pod in between.
  Single-bit (corrected) ECC events stay log-only, as NVIDIA.

:func:`decide` is the one place that says what an event means; the runtime's
:class:`~kubegpu.deviceplugin.rm.health.HealthBook` applies its verdicts.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kubegpu.gpu import xid as xid_facts
from kubegpu.gpu.backend import HealthEvent, HealthEventKind

ENV_DISABLE = "DP_DISABLE_HEALTHCHECKS"
ENV_ENABLE = "DP_ENABLE_HEALTHCHECKS"

#: XIDs NVIDIA treats as application errors, never as device failures.
APPLICATION_XIDS: frozenset[int] = frozenset({13, 31, 43, 45, 68, 109})

#: What an XID means lives with the hardware facts; re-exported for the policy's callers.
XID_MEANINGS = xid_facts.XID_MEANINGS
meaning = xid_facts.meaning
describe = xid_facts.describe


@dataclass(frozen=True)
class XidList:
    """A parsed env var: ``all`` or a set of XIDs, plus the entries that were ignored (for a log line)."""

    all: bool = False
    xids: frozenset[int] = frozenset()
    invalid: tuple[str, ...] = ()


def parse_xids(value: str | None, *, all_words: Iterable[str] = ("all",)) -> XidList:
    """NVIDIA's parsing: lower-case, split on ``,``, trim; non-negative integers only, bad entries ignored.

    ``"68,not-an-int,67"`` -> {67, 68}; ``"-68"`` -> {} (and ``-68`` reported as invalid).
    """
    if not value:
        return XidList()
    words = {w.lower() for w in all_words}
    xids: set[int] = set()
    invalid: list[str] = []
    everything = False
    for raw in value.lower().split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry in words:
            everything = True
        elif entry.isdigit():
            xids.add(int(entry))
        else:
            invalid.append(entry)
    return XidList(all=everything, xids=frozenset(xids), invalid=tuple(invalid))


@dataclass(frozen=True)
class XidPolicy:
    """Which XIDs are fatal.

    ``disabled`` is the ignore set (built-in application XIDs plus ``DP_DISABLE_HEALTHCHECKS``),
    ``enabled`` the XIDs that are always fatal (``DP_ENABLE_HEALTHCHECKS``), overriding any disable.
    """

    disable_all: bool = False
    disabled: frozenset[int] = APPLICATION_XIDS
    enable_all: bool = False
    enabled: frozenset[int] = frozenset()
    invalid: tuple[str, ...] = field(default=(), compare=False)

    @property
    def checks_enabled(self) -> bool:
        """Whether health checking runs at all.

        NVIDIA: not with disable=all, whatever the enable list says. Ours: an explicit enable list keeps it on.
        """
        return not self.disable_all or self.enable_all or bool(self.enabled)

    @property
    def nvidia_checks_enabled(self) -> bool:
        """NVIDIA's answer to :attr:`checks_enabled` (the short-circuit quirk), for the README's comparison."""
        return not self.disable_all

    def is_fatal(self, xid: int) -> bool:
        """Whether XID ``xid`` makes the device unhealthy."""
        if self.enable_all or xid in self.enabled:
            return True
        if self.disable_all:
            return False
        return xid not in self.disabled


def policy_from_env(environ: Mapping[str, str]) -> XidPolicy:
    """The policy from ``DP_DISABLE_HEALTHCHECKS`` (``all``/``xids`` or a list) and ``DP_ENABLE_HEALTHCHECKS``."""
    disable = parse_xids(environ.get(ENV_DISABLE), all_words=("all", "xids"))
    enable = parse_xids(environ.get(ENV_ENABLE))
    return XidPolicy(
        disable_all=disable.all,
        disabled=APPLICATION_XIDS | disable.xids,
        enable_all=enable.all,
        enabled=enable.xids,
        invalid=disable.invalid + enable.invalid,
    )


class Verdict(enum.Enum):
    """What a health event means for the devices it hits."""

    UNHEALTHY = "unhealthy"
    HEALTHY = "healthy"
    IGNORE = "ignore"


@dataclass(frozen=True)
class Decision:
    """A verdict and the reason for the log line (``XID 79 (GPU has fallen off the bus)``)."""

    verdict: Verdict
    reason: str


def decide(event: HealthEvent, policy: XidPolicy) -> Decision:
    """The verdict for one backend event under ``policy``.

    With health checks disabled (``DP_DISABLE_HEALTHCHECKS=all`` and no enable list) every event but a
    recovery is ignored, as NVIDIA then runs no health check at all.
    """
    if event.kind is HealthEventKind.RECOVERED:
        return Decision(Verdict.HEALTHY, "recovered")
    if not policy.checks_enabled:
        what = f"XID {describe(event.xid)}" if event.xid is not None else f"{event.kind.value} event"
        return Decision(Verdict.IGNORE, f"{what}: health checks disabled")
    if event.kind is HealthEventKind.XID:
        if event.xid is None:
            return Decision(Verdict.IGNORE, "XID event without an XID number")
        if not policy.is_fatal(event.xid):
            return Decision(Verdict.IGNORE, f"XID {describe(event.xid)}: not fatal under the XID policy")
        return Decision(Verdict.UNHEALTHY, f"XID {describe(event.xid)}")
    if event.kind is HealthEventKind.LOST:
        return Decision(Verdict.UNHEALTHY, "GPU lost (fallen off the bus)")
    if event.kind is HealthEventKind.WAIT_ERROR:
        return Decision(Verdict.UNHEALTHY, f"health event wait failed: {event.message or 'unknown error'}")
    if event.kind is HealthEventKind.ECC_DBE:
        # A deliberate difference from NVIDIA, which only logs it (module docstring).
        return Decision(Verdict.UNHEALTHY, "double-bit ECC error (uncorrectable)")
    return Decision(Verdict.IGNORE, f"{event.kind.value} event: corrected, logged only")


class Placed(Protocol):
    """What the rule needs of an advertised device (e.g. :class:`~kubegpu.deviceplugin.rm.devices.Device`):
    its physical GPU and, for a MIG device, its (GPU instance, compute instance)."""

    @property
    def gpu_uuid(self) -> str: ...

    @property
    def mig(self) -> tuple[int, int] | None: ...


D = TypeVar("D", bound=Placed)


def affected(devices: Iterable[D], gpu_uuid: str | None, gi_id: int | None = None, ci_id: int | None = None) -> list[D]:
    """The advertised devices an event on GPU ``gpu_uuid`` (None: every GPU) hits, in the given order.

    Every replica and every MIG device of the GPU is hit. With ``gi_id``/``ci_id`` the event is
    scoped to one MIG instance: MIG devices must match them (a None ``ci_id`` matches any compute
    instance of the GPU instance), and a whole-GPU device of that GPU is hit because it contains it.
    """
    out = []
    for device in devices:
        if gpu_uuid is not None and device.gpu_uuid != gpu_uuid:
            continue
        if gpu_uuid is not None and gi_id is not None and device.mig is not None:
            if device.mig[0] != gi_id:
                continue
            if ci_id is not None and device.mig[1] != ci_id:
                continue
        out.append(device)
    return out
