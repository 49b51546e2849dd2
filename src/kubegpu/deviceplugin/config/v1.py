"""NVIDIA's ``version: v1`` config file as frozen, validated dataclasses.

Owns the file schema (``version``, ``flags``, ``resources``, ``sharing``,
``imex``), its parsing from YAML or JSON text, NVIDIA's parsing rules and error
texts (resource-name normalisation, anchored ``*`` patterns, replica and device
selections, durations) and the :class:`ConfigError` whose message names the key
path. The file's ``flags`` are checked against the one declaration of every flag
(:class:`~kubegpu.deviceplugin.config.flags.Flags`) with every key optional and kept
as given; merging with flags, env vars and defaults is
:mod:`kubegpu.deviceplugin.config.effective`'s job.
Pure: parses text it is given, never opens files or reads the environment.

The generic walk (unknown keys, missing keys, strict types, every error with its
key path) is :mod:`kubegpu.common.validation`'s; this module imports PyYAML
only when text is parsed.

Deliberate differences from NVIDIA (documented in the README): unknown keys are
errors naming their path (NVIDIA's YAML decoder silently drops them), and the
per-resource ``rename``/``devices`` of ``sharing.*.resources`` and the
``resources`` patterns are kept, not frozen away.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kubegpu.common.validation import (
    Invalid,
    after,
    before,
    checked,
    dump,
    model,
    nullable,
    only_known_keys,
    partial,
    strict_bool,
    strict_int,
    strict_str,
    tuple_of,
    validate,
)
from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.config.flags import Flags, flag
from kubegpu.deviceplugin.errors import DevicePluginError

VERSION = "v1"

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


@functools.cache
def _device_ref_patterns() -> tuple[re.Pattern[str], ...]:
    """GPU index, MIG index, GPU UUID, MIG UUID: compiled at the first ``devices`` list, not at every start."""
    return (
        re.compile(r"[0-9]+"),
        re.compile(r"[0-9]+:[0-9]+"),
        re.compile(rf"GPU-{_UUID}"),
        re.compile(rf"MIG-{_UUID}|MIG-GPU-{_UUID}/[0-9]+/[0-9]+"),
    )


class ConfigError(DevicePluginError, ValueError):
    """Bad configuration. The message names the source (file, flag or env var), the key path and the rule."""


# --- resource names and patterns ------------------------------------------------------------


def pattern_matches(pattern: str, value: str) -> bool:
    """NVIDIA's resource pattern match: only ``*`` is a wildcard and the whole string must match (v0.20.0+)."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


# --- the models -----------------------------------------------------------------------------
#
# Frozen dataclasses checked by common.validation (field order is the order of keys in dumps and of
# errors). ``checked(check, "camelKey")`` names each field's file key; the field name is accepted too.


def _need_both(data: Mapping[Any, Any]) -> str | None:
    # NVIDIA's "no replicas specified"-style checks run only when every key is known: with a typo'd
    # key (``replica``) the user is better served by "unknown key" on the typo plus "required key is
    # missing" on the real name than by the missing-key text alone.
    if only_known_keys(ResourcePattern, data):
        if "pattern" not in data:
            return "resources must have a 'pattern' field set"
        if "name" not in data:
            return "resources must have a 'name' field set"
    return None


@dataclass(frozen=True, kw_only=True)
class ResourcePattern:
    """One ``resources.gpus[]``/``resources.mig[]`` entry: devices whose name matches ``pattern`` become ``name``.

    GPUs are matched by product name (``NVIDIA A100-SXM4-80GB``), MIG devices by profile (``1g.10gb``).
    """

    pattern: str = field(metadata=checked(strict_str))
    """Anchored glob with ``*`` as the only wildcard."""
    name: str = field(metadata=checked(after(strict_str, naming.resource_name)))
    """Resource name; ``nvidia.com/`` is added when missing."""


_RESOURCES = tuple_of(model(ResourcePattern, first=_need_both))


@dataclass(frozen=True, kw_only=True)
class Resources:
    """Resource naming rules, first match wins (honoured by kubegpu; NVIDIA ignores them)."""

    gpus: tuple[ResourcePattern, ...] = field(default=(), metadata=checked(_RESOURCES))
    mig: tuple[ResourcePattern, ...] = field(default=(), metadata=checked(_RESOURCES))


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
    return any(p.fullmatch(ref) for p in _device_ref_patterns())


#: kubegpu: more replicas than this per device is a typo (8 GPUs x 100000 = 800,000 devices to advertise).
MAX_REPLICAS = 1024


def _replicas(value: int) -> int:
    if value < 2:
        raise ValueError("number of replicas must be >= 2")
    if value > MAX_REPLICAS:
        raise ValueError(f"number of replicas must be within [2, {MAX_REPLICAS}], got {value}")
    return value


def _required(data: Mapping[Any, Any]) -> str | None:
    if only_known_keys(ReplicatedResource, data):  # see _need_both
        if "name" not in data:
            return "no resource name specified"
        if "replicas" not in data:
            return "no replicas specified"
    return None


@dataclass(frozen=True, kw_only=True)
class ReplicatedResource:
    """One ``sharing.<strategy>.resources[]`` entry: advertise ``replicas`` copies of each selected device."""

    name: str = field(metadata=checked(after(strict_str, naming.resource_name)))
    """Resource to share; ``gpu`` is normalised to ``nvidia.com/gpu``."""
    rename: str | None = field(default=None, metadata=checked(nullable(after(strict_str, naming.resource_name))))
    """Publish the copies under this name instead (``<name>.shared`` with ``renameByDefault``)."""
    devices: DeviceSelection = field(default="all", metadata=checked(before(_device_selection)))
    """``all``, the first N devices by index, or a list of indices (``0``, ``1:0``) and UUIDs."""
    replicas: int = field(metadata=checked(after(strict_int, _replicas)))
    """Copies per device; at least 2."""

    @property
    def published_name(self) -> str:
        """The name the copies are advertised under."""
        return self.rename or self.name


def _need_resources(data: Mapping[Any, Any]) -> str | None:
    if only_known_keys(ReplicatedResources, data) and not data.get("resources"):  # see _need_both
        return "no resources specified"
    return None


def _default_renames(block: ReplicatedResources) -> ReplicatedResources:
    if not block.rename_by_default:
        return block
    renamed = tuple(r if r.rename else replace(r, rename=naming.shared_name(r.name)) for r in block.resources)
    return replace(block, resources=renamed)


@dataclass(frozen=True, kw_only=True)
class ReplicatedResources:
    """A sharing block (``sharing.timeSlicing`` or ``sharing.mps``)."""

    rename_by_default: bool = field(default=False, metadata=checked(strict_bool, "renameByDefault"))
    """Publish every shared resource without an explicit rename as ``<name>.shared``."""
    fail_requests_greater_than_one: bool | None = field(
        default=None, metadata=checked(nullable(strict_bool), "failRequestsGreaterThanOne")
    )
    """Reject requests for more than one replica. Unset: false for time-slicing, true for MPS."""
    resources: tuple[ReplicatedResource, ...] = field(
        default=(), metadata=checked(tuple_of(model(ReplicatedResource, first=_required)))
    )

    def find(self, name: str) -> ReplicatedResource | None:
        """The entry sharing resource ``name`` (the original name, before any rename)."""
        for entry in self.resources:
            if entry.name == name:
                return entry
        return None


_SHARING_BLOCK = nullable(model(ReplicatedResources, first=_need_resources, last=_default_renames))


@dataclass(frozen=True, kw_only=True)
class Sharing:
    """Time-slicing or MPS; an ``mps`` block wins when both are present."""

    time_slicing: ReplicatedResources | None = field(default=None, metadata=checked(_SHARING_BLOCK, "timeSlicing"))
    mps: ReplicatedResources | None = field(default=None, metadata=checked(_SHARING_BLOCK))

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


@dataclass(frozen=True, kw_only=True)
class Imex:
    """IMEX channels injected into every allocation."""

    channel_ids: tuple[int, ...] = flag(
        (), tuple_of(strict_int), "channelIDs", "--imex-channel-ids", "IMEX_CHANNEL_IDS", "intlist",
        "IMEX channel IDs ([] or [0])",
    )  # fmt: skip
    """``[]`` or ``[0]``."""
    required: bool = flag(
        False, strict_bool, None, "--imex-required", "IMEX_REQUIRED", "bool", "the IMEX channels are required"
    )
    """Fail at start when a channel's device node is missing (else skip it with a warning)."""


def _version(value: str) -> str:
    if value == "":
        return VERSION
    if value != VERSION:
        raise ValueError(f"unknown version: {value}")
    return value


@dataclass(frozen=True, kw_only=True)
class ConfigFile:
    """A whole ``version: v1`` config file."""

    version: str = field(default=VERSION, metadata=checked(after(strict_str, _version)))
    flags: Mapping[str, Any] = field(default_factory=dict, metadata=checked(partial(Flags)))
    """The ``flags`` section as given (document keys, every key optional); checked against :class:`Flags`."""
    resources: Resources = field(default_factory=Resources, metadata=checked(model(Resources)))
    sharing: Sharing = field(default_factory=Sharing, metadata=checked(model(Sharing)))
    imex: Imex = field(default_factory=Imex, metadata=checked(model(Imex)))

    def to_dict(self) -> dict[str, Any]:
        """The file as a document (camelCase keys, unset flags left out); parsing it gives this file back."""
        return dump(self)


# --- parsing --------------------------------------------------------------------------------


@functools.cache
def _loader() -> type[Any]:
    """A SafeLoader for YAML 1.1 without sexagesimal numbers, so a MIG index ``1:0`` stays a string (as in Go).

    Built on first use: PyYAML is imported only when a config file is actually read.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        first: [
            (tag, regexp)
            for tag, regexp in resolvers
            if not (tag.endswith((":int", ":float")) and ":" in regexp.pattern)
        ]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    # The int/float resolvers also cover ordinary numbers; re-add them without the base-60 branch.
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:int",
        re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
        list("-+0123456789"),
    )
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+0123456789."),
    )
    return Loader


def parse_data(data: Any, source: str = "<config>") -> ConfigFile:
    """Validate an already decoded config document. Raises :class:`ConfigError` naming every bad key."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"unable to parse config file {source}: top level must be a mapping, got {data!r}")
    try:
        return validate(ConfigFile, dict(data))
    except Invalid as exc:
        raise ConfigError(f"unable to parse config file {source}: {exc}") from None


def parse_text(text: str, source: str = "<config>") -> ConfigFile:
    """Parse YAML or JSON config text (JSON is YAML). Raises :class:`ConfigError`."""
    import yaml

    try:
        data = yaml.load(text, Loader=_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"unable to parse config file {source}: not valid YAML/JSON: {exc}") from None
    return parse_data(data, source)
