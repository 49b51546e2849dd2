"""The node agent's settings and the parsing of its kubelet-named flags.

Owns :class:`AgentConfig` and the pure parsers of ``--node-labels``
(``k=v,…``), ``--register-with-taints`` (``key[=value]:Effect,…``), Go-style
durations (``10s``, ``1m30s``, ``500ms``) and resource lists
(``cpu=64,memory=1Ti``), each raising :class:`ValueError` with a message that
names the flag and the value at fault. Must not do I/O: the machine's CPU and
memory are read by the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from kubegpu.kubelet.pod import parse_quantity

#: The kubelet's defaults (KubeletConfiguration v1beta1).
NODE_STATUS_UPDATE_FREQUENCY_S = 10.0
NODE_STATUS_REPORT_FREQUENCY_S = 300.0
NODE_LEASE_DURATION_S = 40
#: The kubelet renews its lease every quarter of the lease duration (10 s for 40 s).
LEASE_RENEW_FRACTION = 0.25
MAX_PODS = 110
NODE_LEASE_NAMESPACE = "kube-node-lease"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def to_json(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent needs besides the emulator itself."""

    node_name: str
    kubeconfig: Path | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: Non-device capacity: cpu, memory, pods, ephemeral-storage… (quantity strings).
    capacity: dict[str, str] = field(default_factory=dict)
    #: kube-reserved + system-reserved, subtracted from capacity for allocatable.
    reserved: dict[str, Fraction] = field(default_factory=dict)
    status_update_frequency: float = NODE_STATUS_UPDATE_FREQUENCY_S
    status_report_frequency: float = NODE_STATUS_REPORT_FREQUENCY_S
    lease_duration: int = NODE_LEASE_DURATION_S
    #: Addresses reported in Node status (InternalIP).
    internal_ip: str = "127.0.0.1"

    @property
    def lease_renew_interval(self) -> float:
        return self.lease_duration * LEASE_RENEW_FRACTION


def qualified_name_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return "name part must be 1-63 alphanumerics, '-', '_' or '.', beginning and ending alphanumeric"
    return None


def node_name_error(name: str) -> str | None:
    """Why ``name`` cannot name a Node (a DNS-1123 subdomain; at most 63 characters, as it is also a label value)."""
    if not name or len(name) > 63 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return "must be lower-case alphanumerics, '-' or '.', beginning and ending alphanumeric, at most 63 characters"
    return None


def parse_labels(text: str, flag: str = "--node-labels") -> dict[str, str]:
    """``k=v,k2=v2`` as a dict; an empty string is no labels."""
    labels: dict[str, str] = {}
    for item in _items(text):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"{flag}: {item!r} must be key=value")
        problem = qualified_name_error(key)
        if problem:
            raise ValueError(f"{flag}: invalid label key {key!r}: {problem}")
        if value and (len(value) > 63 or not _NAME.fullmatch(value)):
            raise ValueError(
                f"{flag}: invalid label value {value!r} of {key!r}: at most 63 alphanumerics, '-', '_' or '.', "
                "beginning and ending alphanumeric"
            )
        labels[key] = value
    return labels


def parse_taints(text: str, flag: str = "--register-with-taints") -> tuple[Taint, ...]:
    """``key=value:Effect,key:Effect`` as taints (kubelet's ``ParseTaints`` syntax)."""
    taints: list[Taint] = []
    for item in _items(text):
        head, colon, effect = item.rpartition(":")
        if not colon:
            raise ValueError(f"{flag}: invalid taint spec {item!r}: must be key[=value]:effect")
        if effect not in TAINT_EFFECTS:
            raise ValueError(f"{flag}: invalid taint effect {effect!r} in {item!r}: must be one of {TAINT_EFFECTS}")
        key, _, value = head.partition("=")
        problem = qualified_name_error(key)
        if problem:
            raise ValueError(f"{flag}: invalid taint key {key!r}: {problem}")
        if value and (len(value) > 63 or not _NAME.fullmatch(value)):
            raise ValueError(f"{flag}: invalid taint value {value!r} of {key!r}")
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def parse_duration(text: str, flag: str) -> float:
    """A Go duration (``10s``, ``1m30s``, ``250ms``) or plain seconds, as seconds (> 0)."""
    s = text.strip()
    try:
        seconds = float(s)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _DURATION_PART.finditer(s):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _DURATION_UNIT[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(f"{flag}: invalid duration {text!r} (e.g. 10s, 1m30s, 500ms)") from None
    if seconds <= 0:
        raise ValueError(f"{flag}: must be positive, got {text!r}")
    return seconds


def parse_resources(text: str, flag: str) -> dict[str, str]:
    """``cpu=64,memory=1Ti`` as {name: quantity string}; every quantity is checked."""
    out: dict[str, str] = {}
    for item in _items(text):
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            raise ValueError(f"{flag}: {item!r} must be resource=quantity")
        try:
            quantity = parse_quantity(value)
        except ValueError as exc:
            raise ValueError(f"{flag}: {name}: {exc}") from None
        if quantity < 0:
            raise ValueError(f"{flag}: {name}: must not be negative, got {value!r}")
        out[name] = value
    return out


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
