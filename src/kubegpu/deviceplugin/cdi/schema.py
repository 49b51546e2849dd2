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
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, field_validator, model_validator

from kubegpu.common.validation import format_errors

#: Spec versions the Go library knows, oldest first (0.3.0 is the earliest it still loads).
VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
CURRENT_VERSION = "1.1.0"
HOOK_NAMES = ("createRuntime", "createContainer", "startContainer", "poststart", "poststop")

_SEGMENT = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_KIND = re.compile(rf"({_SEGMENT})/({_SEGMENT})")
_DEVICE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_ENV = re.compile(r"[^=\s]+=.*", re.DOTALL)

Str = Annotated[str, Strict()]
UInt32 = Annotated[int, Strict(), Field(ge=0, le=4294967295)]
Int64 = Annotated[int, Strict(), Field(ge=-(2**63), le=2**63 - 1)]

_MODEL = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class CdiError(ValueError):
    """A CDI document that the Go loader (or our stricter rules) would reject; names the key path."""


class DeviceNode(BaseModel):
    model_config = _MODEL

    path: Str
    host_path: Str | None = Field(default=None, alias="hostPath")
    type: Str | None = None
    major: Int64 | None = None
    minor: Int64 | None = None
    file_mode: UInt32 | None = Field(default=None, alias="fileMode")
    permissions: Str | None = None
    uid: UInt32 | None = None
    gid: UInt32 | None = None

    @field_validator("path", "host_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"device node path {value!r} must be absolute")
        return value

    @field_validator("type")
    @classmethod
    def _type(cls, value: str | None) -> str | None:
        if value not in (None, "", "b", "c", "u", "p"):
            raise ValueError(f"invalid device node type {value!r}: must be one of b, c, u, p")
        return value

    @field_validator("permissions")
    @classmethod
    def _permissions(cls, value: str | None) -> str | None:
        if value and (set(value) - set("rwm") or len(set(value)) != len(value)):
            raise ValueError(f"invalid device node permissions {value!r}: letters r, w, m, each at most once")
        return value


class Mount(BaseModel):
    model_config = _MODEL

    host_path: Str = Field(alias="hostPath")
    container_path: Str = Field(alias="containerPath")
    options: tuple[Str, ...] | None = None
    type: Str | None = None


class Hook(BaseModel):
    model_config = _MODEL

    hook_name: Str = Field(alias="hookName")
    path: Str
    args: tuple[Str, ...] | None = None
    env: tuple[Str, ...] | None = None
    timeout: UInt32 | None = None

    @field_validator("hook_name")
    @classmethod
    def _name(cls, value: str) -> str:
        if value not in HOOK_NAMES:
            raise ValueError(f"invalid hook name {value!r}: must be one of {', '.join(HOOK_NAMES)}")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _check_env(value)


class NetDevice(BaseModel):
    model_config = _MODEL

    host_interface_name: Str = Field(alias="hostInterfaceName")
    name: Str


class IntelRdt(BaseModel):
    model_config = _MODEL

    clos_id: Str | None = Field(default=None, alias="closID")
    l3_cache_schema: Str | None = Field(default=None, alias="l3CacheSchema")
    mem_bw_schema: Str | None = Field(default=None, alias="memBwSchema")
    schemata: tuple[Str, ...] | None = None
    enable_monitoring: Annotated[bool, Strict()] | None = Field(default=None, alias="enableMonitoring")


def _check_env(value: tuple[str, ...] | None) -> tuple[str, ...] | None:
    for entry in value or ():
        if not _ENV.fullmatch(entry):
            raise ValueError(f"invalid env entry {entry!r}: must be KEY=VALUE")
    return value


class ContainerEdits(BaseModel):
    model_config = _MODEL

    env: tuple[Str, ...] | None = None
    device_nodes: tuple[DeviceNode, ...] | None = Field(default=None, alias="deviceNodes")
    mounts: tuple[Mount, ...] | None = None
    hooks: tuple[Hook, ...] | None = None
    net_devices: tuple[NetDevice, ...] | None = Field(default=None, alias="netDevices")
    intel_rdt: IntelRdt | None = Field(default=None, alias="intelRdt")
    additional_gids: tuple[UInt32, ...] | None = Field(default=None, alias="additionalGids")

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _check_env(value)

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


class Device(BaseModel):
    model_config = _MODEL

    name: Str
    annotations: dict[str, Str] | None = None
    container_edits: ContainerEdits = Field(alias="containerEdits")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _DEVICE_NAME.fullmatch(value):
            raise ValueError(
                f"invalid device name {value!r}: alphanumerics first and last, then letters, digits, '_', '.', ':', '-'"
            )
        return value


class Spec(BaseModel):
    """A whole CDI spec file."""

    model_config = _MODEL

    cdi_version: Str = Field(alias="cdiVersion")
    kind: Str
    annotations: dict[str, Str] | None = None
    devices: tuple[Device, ...]
    container_edits: ContainerEdits | None = Field(default=None, alias="containerEdits")

    @field_validator("cdi_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value not in VERSIONS:
            raise ValueError(f"unsupported cdiVersion {value!r}: one of {', '.join(VERSIONS)}")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        match = _KIND.fullmatch(value)
        if match is None:
            raise ValueError(f"invalid kind {value!r}: must be <vendor>/<class>")
        if len(match[2]) > 63:
            raise ValueError(f"invalid kind {value!r}: the class is longer than 63 characters")
        return value

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: tuple[Device, ...]) -> tuple[Device, ...]:
        if not value:
            raise ValueError("a spec needs at least one device")
        names = [d.name for d in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate device names: {', '.join(duplicates)}")
        return value

    @model_validator(mode="after")
    def _version_covers_content(self) -> Spec:
        needed = required_version(self)
        if VERSIONS.index(self.cdi_version) < VERSIONS.index(needed):
            raise ValueError(f"cdiVersion {self.cdi_version} is too old for this content: it needs {needed}")
        return self

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
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


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
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise CdiError(f"{source}: " + "; ".join(format_errors(exc))) from None


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
