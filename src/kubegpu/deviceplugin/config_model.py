"""NVIDIA's ``version: v1`` config file as frozen, validated models.

Owns the file schema (``version``, ``flags``, ``resources``, ``sharing``,
``imex``), its parsing from YAML or JSON text, NVIDIA's parsing rules and error
texts (resource-name normalisation, anchored ``*`` patterns, replica and device
selections, durations) and the :class:`ConfigError` whose message names the key
path. Every flag in the file is optional (``None`` = "not set here"); merging
with flags, env vars and defaults is :mod:`kubegpu.deviceplugin.config`'s job.
Pure: parses text it is given, never opens files or reads the environment.

Deliberate differences from NVIDIA (documented in the README): unknown keys are
errors naming their path (NVIDIA's YAML decoder silently drops them), and the
per-resource ``rename``/``devices`` of ``sharing.*.resources`` and the
``resources`` patterns are kept, not frozen away.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, field_validator, model_validator

#: Prefix added to resource names given without one (NVIDIA reads ``RESOURCE_PREFIX``; we fix it).
RESOURCE_PREFIX = "nvidia.com"
MAX_RESOURCE_NAME_LENGTH = 63
#: Suffix of a shared resource's default rename (``renameByDefault``).
SHARED_SUFFIX = ".shared"
VERSION = "v1"

StrictBool = Annotated[bool, Strict()]
StrictInt = Annotated[int, Strict()]
StrictStr = Annotated[str, Strict()]

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"GPU-{_UUID}")
_MIG_UUID = re.compile(rf"MIG-{_UUID}|MIG-GPU-{_UUID}/[0-9]+/[0-9]+")
_GPU_INDEX = re.compile(r"[0-9]+")
_MIG_INDEX = re.compile(r"[0-9]+:[0-9]+")


class ConfigError(ValueError):
    """Bad configuration. The message names the source (file, flag or env var), the key path and the rule."""


# --- resource names and patterns ------------------------------------------------------------


def resource_name(raw: str) -> str:
    """NVIDIA's resource-name normalisation: add ``nvidia.com/`` when missing, then check length and format.

    Raises ``ValueError`` with NVIDIA's texts (``fully-qualified resource name must be 63 characters or
    less: …``, ``incorrect format for resource name '…': […]``).
    """
    name = raw if raw.startswith(RESOURCE_PREFIX + "/") else f"{RESOURCE_PREFIX}/{raw}"
    if len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise ValueError(f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {name}")
    short = name.split("/", 1)[1]
    if len(short) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(short):
        raise ValueError(f"incorrect format for resource name '{name}': [{_DNS1123_MESSAGE}]")
    return name


def short_name(name: str) -> str:
    """The part of a resource name after the ``/`` (``nvidia.com/mig-1g.10gb`` -> ``mig-1g.10gb``)."""
    return name.split("/", 1)[1] if "/" in name else name


def pattern_matches(pattern: str, value: str) -> bool:
    """NVIDIA's resource pattern match: only ``*`` is a wildcard and the whole string must match (v0.20.0+)."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


# --- durations ------------------------------------------------------------------------------

INFINITE = "infinite"
_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9}
_UNITS_NS["h"] = 3600 * 10**9
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration string (``1h30m``, ``60s``, ``1.5s``, ``250ms``, ``0``) into nanoseconds.

    Raises ``ValueError`` with Go's texts (``time: invalid duration "x"``, ``time: missing unit in duration "60"``).
    """
    original = text
    s = text.strip()
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f'time: invalid duration "{original}"')
    total = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            if re.fullmatch(r"[0-9.]+", s[pos:]):
                raise ValueError(f'time: missing unit in duration "{original}"')
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _UNITS_NS[match.group(2)]
        pos = match.end()
    return sign * round(total)


def format_duration_ns(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``1m0s``, ``1.5s``, ``250ms``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _trim(rest / 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def normalise_duration(value: Any, *, allow_infinite: bool) -> str:
    """A file/flag duration (int nanoseconds, Go duration string, or ``infinite``) in canonical Go form."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: expected a duration string like 60s")
    if isinstance(value, int):
        return format_duration_ns(value)
    if isinstance(value, str):
        if value.strip().lower() == INFINITE:
            if not allow_infinite:
                raise ValueError(f"invalid duration {value!r}: 'infinite' is not allowed here")
            return INFINITE
        return format_duration_ns(parse_duration_ns(value))
    raise ValueError(f"invalid duration {value!r}: expected a duration string like 60s")


def normalise_seconds(value: Any) -> str:
    """kubegpu's own durations: a bare number is seconds (``300``, ``"2.5"``), else as :func:`normalise_duration`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0 or value != value or value == math.inf:
            raise ValueError(f"invalid duration {value!r}: must be a finite number of seconds >= 0")
        return format_duration_ns(round(value * 1e9))
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+(\.[0-9]*)?\s*", value):
        return format_duration_ns(round(float(value) * 1e9))
    if isinstance(value, str) and re.fullmatch(r"\s*-\s*[0-9.]+\s*", value):
        raise ValueError(f"invalid duration {value!r}: must be a finite number of seconds >= 0")
    return normalise_duration(value, allow_infinite=False)


def duration_seconds(value: str) -> float:
    """Seconds of a canonical duration; ``math.inf`` for ``infinite``."""
    if value == INFINITE:
        return math.inf
    return parse_duration_ns(value) / 1e9


# --- the models -----------------------------------------------------------------------------

_MODEL = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _only_known(model: type[BaseModel], data: Mapping[str, Any]) -> bool:
    """True when every key is a field of ``model``.

    NVIDIA's "no replicas specified"-style checks run only then: with a typo'd key
    (``replica``) the user is better served by "unknown key" on the typo plus
    "required key is missing" on the real name than by the missing-key text alone.
    """
    known = {f.alias or n for n, f in model.model_fields.items()} | set(model.model_fields)
    return all(key in known for key in data)


class Resource(BaseModel):
    """One ``resources.gpus[]``/``resources.mig[]`` entry: devices whose name matches ``pattern`` become ``name``.

    GPUs are matched by product name (``NVIDIA A100-SXM4-80GB``), MIG devices by profile (``1g.10gb``).
    """

    model_config = _MODEL

    pattern: StrictStr
    """Anchored glob with ``*`` as the only wildcard."""
    name: StrictStr
    """Resource name; ``nvidia.com/`` is added when missing."""

    @model_validator(mode="before")
    @classmethod
    def _need_both(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and _only_known(cls, data):
            if "pattern" not in data:
                raise ValueError("resources must have a 'pattern' field set")
            if "name" not in data:
                raise ValueError("resources must have a 'name' field set")
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return resource_name(value)


class Resources(BaseModel):
    """Resource naming rules, first match wins (honoured by kubegpu; NVIDIA ignores them)."""

    model_config = _MODEL

    gpus: tuple[Resource, ...] = ()
    mig: tuple[Resource, ...] = ()


DeviceSelection = Literal["all"] | int | tuple[str, ...]


def _device_selection(value: Any) -> DeviceSelection:
    """NVIDIA's ``devices`` union: ``"all"``, a positive count, or a list of indices / UUIDs."""
    if isinstance(value, str):
        if value != "all":
            raise ValueError(f"devices set as '{value}' but the only valid string input is 'all'")
        return "all"
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"devices set as '{value}' but a count of devices must be > 0")
        return value
    if isinstance(value, (list, tuple)):
        refs: list[str] = []
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                refs.append(str(item))
            elif isinstance(item, str) and is_device_ref(item):
                refs.append(item)
            else:
                raise ValueError(f"unsupported type for device in devices list: {item!r}")
        return tuple(refs)
    raise ValueError(f"unrecognized type for devices spec: {value!r}")


def is_device_ref(ref: str) -> bool:
    """A GPU index (``0``), MIG index (``0:1``), GPU UUID or MIG UUID (incl. legacy ``MIG-GPU-<uuid>/gi/ci``)."""
    return any(p.fullmatch(ref) for p in (_GPU_INDEX, _MIG_INDEX, _GPU_UUID, _MIG_UUID))


class ReplicatedResource(BaseModel):
    """One ``sharing.<strategy>.resources[]`` entry: advertise ``replicas`` copies of each selected device."""

    model_config = _MODEL

    name: StrictStr
    """Resource to share; ``gpu`` is normalised to ``nvidia.com/gpu``."""
    rename: StrictStr | None = None
    """Publish the copies under this name instead (``<name>.shared`` with ``renameByDefault``)."""
    devices: DeviceSelection = "all"
    """``all``, the first N devices by index, or a list of indices (``0``, ``1:0``) and UUIDs."""
    replicas: StrictInt
    """Copies per device; at least 2."""

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and _only_known(cls, data):
            if "name" not in data:
                raise ValueError("no resource name specified")
            if "replicas" not in data:
                raise ValueError("no replicas specified")
        return data

    @field_validator("name", "rename")
    @classmethod
    def _names(cls, value: str | None) -> str | None:
        return None if value is None else resource_name(value)

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, value: Any) -> DeviceSelection:
        return _device_selection(value)

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, value: int) -> int:
        if value < 2:
            raise ValueError("number of replicas must be >= 2")
        return value

    @property
    def published_name(self) -> str:
        """The name the copies are advertised under."""
        return self.rename or self.name


class ReplicatedResources(BaseModel):
    """A sharing block (``sharing.timeSlicing`` or ``sharing.mps``)."""

    model_config = _MODEL

    rename_by_default: StrictBool = Field(default=False, alias="renameByDefault")
    """Publish every shared resource without an explicit rename as ``<name>.shared``."""
    fail_requests_greater_than_one: StrictBool | None = Field(default=None, alias="failRequestsGreaterThanOne")
    """Reject requests for more than one replica. Unset: false for time-slicing, true for MPS."""
    resources: tuple[ReplicatedResource, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _need_resources(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and _only_known(cls, data) and not data.get("resources"):
            raise ValueError("no resources specified")
        return data

    @model_validator(mode="after")
    def _default_renames(self) -> ReplicatedResources:
        if self.rename_by_default:
            renamed = tuple(
                r if r.rename else r.model_copy(update={"rename": r.name + SHARED_SUFFIX}) for r in self.resources
            )
            object.__setattr__(self, "resources", renamed)
        return self

    def find(self, name: str) -> ReplicatedResource | None:
        """The entry sharing resource ``name`` (the original name, before any rename)."""
        for entry in self.resources:
            if entry.name == name:
                return entry
        return None


class Sharing(BaseModel):
    """Time-slicing or MPS; an ``mps`` block wins when both are present."""

    model_config = _MODEL

    time_slicing: ReplicatedResources | None = Field(default=None, alias="timeSlicing")
    mps: ReplicatedResources | None = None

    @property
    def strategy(self) -> Literal["none", "time-slicing", "mps"]:
        """The active sharing strategy, as NVIDIA decides it."""
        if self.mps is not None and self.mps.resources:
            return "mps"
        if self.time_slicing is not None and self.time_slicing.resources:
            return "time-slicing"
        return "none"

    @property
    def replicated(self) -> ReplicatedResources | None:
        """The block whose resources are replicated: ``mps`` whenever present, else ``timeSlicing``."""
        return self.mps if self.mps is not None else self.time_slicing


class Imex(BaseModel):
    """IMEX channels injected into every allocation."""

    model_config = _MODEL

    channel_ids: tuple[StrictInt, ...] = Field(default=(), alias="channelIDs")
    """``[]`` or ``[0]``."""
    required: StrictBool = False
    """Fail at start when a channel's device node is missing (else skip it with a warning)."""


class PluginFileFlags(BaseModel):
    """``flags.plugin`` as a file gives it; every key optional."""

    model_config = _MODEL

    pass_device_specs: StrictBool | None = Field(default=None, alias="passDeviceSpecs")
    device_list_strategy: tuple[StrictStr, ...] | None = Field(default=None, alias="deviceListStrategy")
    device_id_strategy: StrictStr | None = Field(default=None, alias="deviceIDStrategy")
    cdi_annotation_prefix: StrictStr | None = Field(default=None, alias="cdiAnnotationPrefix")
    nvidia_ctk_path: StrictStr | None = Field(default=None, alias="nvidiaCTKPath")
    container_driver_root: StrictStr | None = Field(default=None, alias="containerDriverRoot")
    shared_devices_allocation_policy: StrictStr | None = Field(default=None, alias="sharedDevicesAllocationPolicy")
    allocation_policy: StrictStr | None = Field(default=None, alias="allocationPolicy")
    health_recovery_quiet_period: str | None = Field(default=None, alias="healthRecoveryQuietPeriod")

    @field_validator("device_list_strategy", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("health_recovery_quiet_period", mode="before")
    @classmethod
    def _quiet(cls, value: Any) -> Any:
        return None if value is None else normalise_seconds(value)


class GfdFileFlags(BaseModel):
    """``flags.gfd`` as a file gives it; every key optional."""

    model_config = _MODEL

    oneshot: StrictBool | None = None
    no_timestamp: StrictBool | None = Field(default=None, alias="noTimestamp")
    sleep_interval: str | None = Field(default=None, alias="sleepInterval")
    output_file: StrictStr | None = Field(default=None, alias="outputFile")
    machine_type_file: StrictStr | None = Field(default=None, alias="machineTypeFile")

    @field_validator("sleep_interval", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        return None if value is None else normalise_duration(value, allow_infinite=True)


class FileFlags(BaseModel):
    """``flags`` as a file gives it; every key optional."""

    model_config = _MODEL

    mig_strategy: StrictStr | None = Field(default=None, alias="migStrategy")
    fail_on_init_error: StrictBool | None = Field(default=None, alias="failOnInitError")
    nvidia_driver_root: StrictStr | None = Field(default=None, alias="nvidiaDriverRoot")
    nvidia_dev_root: StrictStr | None = Field(default=None, alias="nvidiaDevRoot")
    mps_root: StrictStr | None = Field(default=None, alias="mpsRoot")
    gdrcopy_enabled: StrictBool | None = Field(default=None, alias="gdrcopyEnabled")
    gds_enabled: StrictBool | None = Field(default=None, alias="gdsEnabled")
    mofed_enabled: StrictBool | None = Field(default=None, alias="mofedEnabled")
    use_node_feature_api: StrictBool | None = Field(default=None, alias="useNodeFeatureAPI")
    device_discovery_strategy: StrictStr | None = Field(default=None, alias="deviceDiscoveryStrategy")
    plugin: PluginFileFlags | None = None
    gfd: GfdFileFlags | None = None


class ConfigFile(BaseModel):
    """A whole ``version: v1`` config file."""

    model_config = _MODEL

    version: StrictStr = VERSION
    flags: FileFlags = Field(default_factory=lambda: FileFlags.model_validate({}))
    resources: Resources = Field(default_factory=lambda: Resources.model_validate({}))
    sharing: Sharing = Field(default_factory=lambda: Sharing.model_validate({}))
    imex: Imex = Field(default_factory=lambda: Imex.model_validate({}))

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value == "":
            return VERSION
        if value != VERSION:
            raise ValueError(f"unknown version: {value}")
        return value


# --- parsing --------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML 1.1 without sexagesimal numbers, so a MIG index ``1:0`` stays a string (as in Go's decoder)."""


_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp) for tag, regexp in resolvers if not (tag.endswith((":int", ":float")) and ":" in regexp.pattern)
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# The int/float resolvers also cover ordinary numbers; re-add them without the base-60 branch.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def key_path(loc: Sequence[int | str]) -> str:
    """``('sharing', 'timeSlicing', 'resources', 0, 'replicas')`` -> ``sharing.timeSlicing.resources[0].replicas``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _describe(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error.get("msg", "")))
    return str(error.get("msg", kind))


def format_errors(exc: ValidationError) -> list[str]:
    """One ``<key path>: <rule>`` line per validation error, in pydantic's order."""
    lines = []
    for error in exc.errors():
        # pydantic appends the union member / validator name to loc for some errors; drop those.
        loc = [p for p in error["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
        path = key_path(loc)
        lines.append(f"{path}: {_describe(error)}" if path else _describe(error))
    return lines


def parse_data(data: Any, source: str = "<config>") -> ConfigFile:
    """Validate an already decoded config document. Raises :class:`ConfigError` naming every bad key."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"unable to parse config file {source}: top level must be a mapping, got {data!r}")
    try:
        return ConfigFile.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(f"unable to parse config file {source}: " + "; ".join(format_errors(exc))) from None


def parse_text(text: str, source: str = "<config>") -> ConfigFile:
    """Parse YAML or JSON config text (JSON is YAML). Raises :class:`ConfigError`."""
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"unable to parse config file {source}: not valid YAML/JSON: {exc}") from None
    return parse_data(data, source)
