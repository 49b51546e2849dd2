"""The CDI spec format as a strict model: stricter than the official JSON schema, as strict as the Go loader.

Owns the Container Device Interface document model (``cdiVersion``, ``kind``,
``devices[].containerEdits``, spec-level ``containerEdits``), its naming rules
(kind ``<vendor>/<class>``, device names), the checks the official schema
leaves out (no unknown keys, env entries ``KEY=VALUE``, hook names, device-node
permissions and types, unique device names) and the minimum spec version its
content needs (``hostPath`` needs 0.5.0, …). Pure: builds and checks documents;
:mod:`kubegpu.deviceplugin.cdi.generate` fills them, :mod:`kubegpu.deviceplugin.cdi.writer` writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubegpu.common.validation import (
    Check,
    Invalid,
    Issue,
    Loc,
    after,
    checked,
    dump,
    model,
    nullable,
    strict_bool,
    strict_int,
    strict_str,
    tuple_of,
    validate,
)
from kubegpu.deviceplugin.errors import DevicePluginError

#: Spec versions the Go library knows, oldest first (0.3.0 is the earliest it still loads).
VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
CURRENT_VERSION = "1.1.0"
HOOK_NAMES = ("createRuntime", "createContainer", "startContainer", "poststart", "poststop")

_SEGMENT = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_KIND = re.compile(rf"({_SEGMENT})/({_SEGMENT})")
_DEVICE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_ENV = re.compile(r"[^=\s]+=.*", re.DOTALL)


class CdiError(DevicePluginError, ValueError):
    """A CDI document that the Go loader (or our stricter rules) would reject; names the key path."""


# --- field checks ---------------------------------------------------------------------------


def _rule(rule: Callable[[Any], None]) -> Callable[[Any], Any]:
    """A ``ValueError``-raising rule as a conversion that keeps the value (for :func:`after`)."""

    def convert(value: Any) -> Any:
        rule(value)
        return value

    return convert


def _int_range(low: int, high: int) -> Check:
    def in_range(value: int) -> None:
        if value < low:
            raise ValueError(f"Input should be greater than or equal to {low}")
        if value > high:
            raise ValueError(f"Input should be less than or equal to {high}")

    return after(strict_int, _rule(in_range))


def _str_map(value: Any, loc: Loc, issues: list[Issue]) -> Any:
    if not isinstance(value, Mapping):
        issues.append(Issue(loc, "Input should be a valid dictionary"))
        return value
    return {k: strict_str(v, (*loc, k), issues) for k, v in value.items()}


def _absolute(value: str) -> None:
    if not value.startswith("/"):
        raise ValueError(f"device node path {value!r} must be absolute")


def _node_type(value: str) -> None:
    if value not in ("", "b", "c", "u", "p"):
        raise ValueError(f"invalid device node type {value!r}: must be one of b, c, u, p")


def _permissions(value: str) -> None:
    if value and (set(value) - set("rwm") or len(set(value)) != len(value)):
        raise ValueError(f"invalid device node permissions {value!r}: letters r, w, m, each at most once")


def _hook_name(value: str) -> None:
    if value not in HOOK_NAMES:
        raise ValueError(f"invalid hook name {value!r}: must be one of {', '.join(HOOK_NAMES)}")


def _env_entries(value: tuple[str, ...]) -> None:
    for entry in value:
        if not _ENV.fullmatch(entry):
            raise ValueError(f"invalid env entry {entry!r}: must be KEY=VALUE")


def _device_name(value: str) -> None:
    if not _DEVICE_NAME.fullmatch(value):
        raise ValueError(
            f"invalid device name {value!r}: alphanumerics first and last, then letters, digits, '_', '.', ':', '-'"
        )


def _cdi_version(value: str) -> None:
    if value not in VERSIONS:
        raise ValueError(f"unsupported cdiVersion {value!r}: one of {', '.join(VERSIONS)}")


def _kind(value: str) -> None:
    match = _KIND.fullmatch(value)
    if match is None:
        raise ValueError(f"invalid kind {value!r}: must be <vendor>/<class>")
    if len(match[2]) > 63:
        raise ValueError(f"invalid kind {value!r}: the class is longer than 63 characters")


_STR = nullable(strict_str)
_UINT32 = _int_range(0, 4294967295)
_INT64 = _int_range(-(2**63), 2**63 - 1)
_ENVS = after(tuple_of(strict_str), _rule(_env_entries))


def _optional(check: Check, key: str | None = None) -> dict[str, Any]:
    """The metadata of an optional field (absent or ``null`` = ``None``, left out of dumps)."""
    return checked(nullable(check), key)


# --- the model ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DeviceNode:
    path: str = field(metadata=checked(after(strict_str, _rule(_absolute))))
    host_path: str | None = field(default=None, metadata=_optional(after(strict_str, _rule(_absolute)), "hostPath"))
    type: str | None = field(default=None, metadata=_optional(after(strict_str, _rule(_node_type))))
    major: int | None = field(default=None, metadata=_optional(_INT64))
    minor: int | None = field(default=None, metadata=_optional(_INT64))
    file_mode: int | None = field(default=None, metadata=_optional(_UINT32, "fileMode"))
    permissions: str | None = field(default=None, metadata=_optional(after(strict_str, _rule(_permissions))))
    uid: int | None = field(default=None, metadata=_optional(_UINT32))
    gid: int | None = field(default=None, metadata=_optional(_UINT32))


@dataclass(frozen=True, kw_only=True)
class Mount:
    host_path: str = field(metadata=checked(strict_str, "hostPath"))
    container_path: str = field(metadata=checked(strict_str, "containerPath"))
    options: tuple[str, ...] | None = field(default=None, metadata=_optional(tuple_of(strict_str)))
    type: str | None = field(default=None, metadata=_optional(strict_str))


@dataclass(frozen=True, kw_only=True)
class Hook:
    hook_name: str = field(metadata=checked(after(strict_str, _rule(_hook_name)), "hookName"))
    path: str = field(metadata=checked(strict_str))
    args: tuple[str, ...] | None = field(default=None, metadata=_optional(tuple_of(strict_str)))
    env: tuple[str, ...] | None = field(default=None, metadata=_optional(_ENVS))
    timeout: int | None = field(default=None, metadata=_optional(_UINT32))


@dataclass(frozen=True, kw_only=True)
class NetDevice:
    host_interface_name: str = field(metadata=checked(strict_str, "hostInterfaceName"))
    name: str = field(metadata=checked(strict_str))


@dataclass(frozen=True, kw_only=True)
class IntelRdt:
    clos_id: str | None = field(default=None, metadata=_optional(strict_str, "closID"))
    l3_cache_schema: str | None = field(default=None, metadata=_optional(strict_str, "l3CacheSchema"))
    mem_bw_schema: str | None = field(default=None, metadata=_optional(strict_str, "memBwSchema"))
    schemata: tuple[str, ...] | None = field(default=None, metadata=_optional(tuple_of(strict_str)))
    enable_monitoring: bool | None = field(default=None, metadata=_optional(strict_bool, "enableMonitoring"))


@dataclass(frozen=True, kw_only=True)
class ContainerEdits:
    env: tuple[str, ...] | None = field(default=None, metadata=_optional(_ENVS))
    device_nodes: tuple[DeviceNode, ...] | None = field(
        default=None, metadata=_optional(tuple_of(model(DeviceNode)), "deviceNodes")
    )
    mounts: tuple[Mount, ...] | None = field(default=None, metadata=_optional(tuple_of(model(Mount))))
    hooks: tuple[Hook, ...] | None = field(default=None, metadata=_optional(tuple_of(model(Hook))))
    net_devices: tuple[NetDevice, ...] | None = field(
        default=None, metadata=_optional(tuple_of(model(NetDevice)), "netDevices")
    )
    intel_rdt: IntelRdt | None = field(default=None, metadata=_optional(model(IntelRdt), "intelRdt"))
    additional_gids: tuple[int, ...] | None = field(
        default=None, metadata=_optional(tuple_of(_UINT32), "additionalGids")
    )

    @property
    def empty(self) -> bool:
        return not any(
            (
                self.env,
                self.device_nodes,
                self.mounts,
                self.hooks,
                self.net_devices,
                self.intel_rdt,
                self.additional_gids,
            )
        )


@dataclass(frozen=True, kw_only=True)
class Device:
    name: str = field(metadata=checked(after(strict_str, _rule(_device_name))))
    annotations: dict[str, str] | None = field(default=None, metadata=_optional(_str_map))
    container_edits: ContainerEdits = field(metadata=checked(model(ContainerEdits), "containerEdits"))


def _devices(value: tuple[Device, ...]) -> None:
    if not value:
        raise ValueError("a spec needs at least one device")
    names = [d.name for d in value]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate device names: {', '.join(duplicates)}")


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A whole CDI spec file."""

    cdi_version: str = field(metadata=checked(after(strict_str, _rule(_cdi_version)), "cdiVersion"))
    kind: str = field(metadata=checked(after(strict_str, _rule(_kind))))
    annotations: dict[str, str] | None = field(default=None, metadata=_optional(_str_map))
    devices: tuple[Device, ...] = field(metadata=checked(after(tuple_of(model(Device)), _rule(_devices))))
    container_edits: ContainerEdits | None = field(
        default=None, metadata=_optional(model(ContainerEdits), "containerEdits")
    )

    @property
    def vendor(self) -> str:
        return self.kind.split("/", 1)[0]

    @property
    def cdi_class(self) -> str:
        return self.kind.split("/", 1)[1]

    def qualified_names(self) -> tuple[str, ...]:
        """``<vendor>/<class>=<name>`` of every device."""
        return tuple(f"{self.kind}={d.name}" for d in self.devices)

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def _version_covers_content(spec: Spec) -> Spec:
    needed = required_version(spec)
    if VERSIONS.index(spec.cdi_version) < VERSIONS.index(needed):
        raise ValueError(f"cdiVersion {spec.cdi_version} is too old for this content: it needs {needed}")
    return spec


def _edits(spec: Spec) -> list[ContainerEdits]:
    edits = [d.container_edits for d in spec.devices]
    if spec.container_edits is not None:
        edits.append(spec.container_edits)
    return edits


def required_version(spec: Spec) -> str:
    """The oldest ``cdiVersion`` that can express ``spec`` (the Go library's ``MinimumRequiredVersion``)."""
    needed = "0.3.0"

    def at_least(version: str) -> None:
        nonlocal needed
        if VERSIONS.index(version) > VERSIONS.index(needed):
            needed = version

    edits = _edits(spec)
    if any(m.type for e in edits for m in e.mounts or ()):
        at_least("0.4.0")
    if any(n.host_path for e in edits for n in e.device_nodes or ()):
        at_least("0.5.0")
    if any(d.name[0].isdigit() for d in spec.devices):
        at_least("0.5.0")
    if spec.annotations or any(d.annotations for d in spec.devices) or "." in spec.cdi_class:
        at_least("0.6.0")
    if any(e.additional_gids or e.intel_rdt for e in edits):
        at_least("0.7.0")
    if any(e.intel_rdt and (e.intel_rdt.schemata or e.intel_rdt.enable_monitoring) for e in edits):
        at_least("1.1.0")
    if any(e.net_devices for e in edits):
        at_least("1.1.0")
    return needed


def parse(data: Any, source: str = "<spec>") -> Spec:
    """Validate a decoded CDI document; raises :class:`CdiError` naming every bad key."""
    if not isinstance(data, dict):
        raise CdiError(f"{source}: a CDI spec must be a JSON object")
    try:
        return validate(Spec, data, last=_version_covers_content)
    except Invalid as exc:
        raise CdiError(f"{source}: {exc}") from None


def parse_text(text: str, source: str = "<spec>") -> Spec:
    """Parse CDI JSON (or YAML) text."""
    import yaml

    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CdiError(f"{source}: neither JSON nor YAML: {exc}") from None
    return parse(data, source)
