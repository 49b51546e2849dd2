"""The effective configuration of the plugin, GFD-style labeller and MPS daemon: flags, env vars, file, defaults.

Owns NVIDIA's flag and env-var table (same names, aliases, defaults), the
precedence rule (explicit CLI flag > env var > config file > default), NVIDIA's
post-processing (dev root defaults to the driver root, MPS blocks fail requests
for more than one replica unless told otherwise, default resource patterns), the
flag validation at start ("unable to validate flags: …") and the JSON form of
the effective config. Also the plugin-only extras kubegpu needs: ``--machine``,
``--fault-file``, ``--allocation-policy``, ``--health-recovery-quiet-period``,
``--registration-retry-interval``, ``--cdi-spec-dir``, ``--socket-dir`` and
``--metrics-listen``.

Reads files only through :func:`load` (the ``--config-file``); everything else is
pure. Must not discover devices or talk to the kubelet: the runtime calls
:func:`add_arguments` and :func:`load` and gets a frozen :class:`Config`.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kubegpu.api import constants
from kubegpu.common import boolean, durations
from kubegpu.common.validation import (
    Invalid,
    checked,
    dump,
    model,
    nullable,
    strict_bool,
    strict_str,
    tuple_of,
    validate,
)
from kubegpu.deviceplugin.config import v1
from kubegpu.deviceplugin.config.v1 import ConfigError, Imex, ReplicatedResources, Resources, Sharing

DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
MIG_STRATEGIES = ("none", "single", "mixed")
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")
SHARED_POLICIES = ("distributed", "packed")
#: Policies for whole GPUs, the default first (kubegpu.placement's names).
WHOLE_GPU_POLICIES = ("topology", "best-effort")
DEFAULT_WHOLE_GPU_POLICY = "topology"
#: ``--allocation-policy`` values: GPU-level policies and the two replica policies.
ALLOCATION_POLICIES = ("best-effort", "topology", "distributed", "packed")
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"
DEFAULT_MPS_ROOT_HELM = "/run/nvidia/mps"
DEFAULT_QUIET_PERIOD = "5m0s"
DEFAULT_GFD_OUTPUT = "/etc/kubernetes/node-feature-discovery/features.d/gfd"
DEFAULT_MACHINE_TYPE_FILE = "/sys/class/dmi/id/product_name"


@dataclass(frozen=True, kw_only=True)
class PluginFlags:
    """``flags.plugin`` with every value resolved."""

    pass_device_specs: bool = field(metadata=checked(strict_bool, "passDeviceSpecs"))
    """Return DeviceSpecs (control nodes, /dev/nvidiaN, MIG caps); needed with CPUManager static policy."""
    device_list_strategy: tuple[str, ...] = field(metadata=checked(tuple_of(strict_str), "deviceListStrategy"))
    """How the device list reaches the runtime: envvar, volume-mounts, cdi-annotations, cdi-cri (combinable)."""
    device_id_strategy: str = field(metadata=checked(strict_str, "deviceIDStrategy"))
    """IDs given to the runtime: uuid or index (kubelet always sees UUIDs)."""
    cdi_annotation_prefix: str = field(metadata=checked(strict_str, "cdiAnnotationPrefix"))
    nvidia_ctk_path: str = field(metadata=checked(strict_str, "nvidiaCTKPath"))
    """The CDI hook binary written into CDI specs."""
    container_driver_root: str = field(metadata=checked(strict_str, "containerDriverRoot"))
    """Where the host driver root is mounted inside the plugin container."""
    shared_devices_allocation_policy: str = field(metadata=checked(strict_str, "sharedDevicesAllocationPolicy"))
    """Preferred-allocation policy for replicas and MIG devices: distributed or packed."""
    allocation_policy: str | None = field(default=None, metadata=checked(nullable(strict_str), "allocationPolicy"))
    """kubegpu: preferred-allocation policy; unset = topology for whole GPUs, the shared policy for replicas."""
    health_recovery_quiet_period: str = field(metadata=checked(strict_str, "healthRecoveryQuietPeriod"))
    """kubegpu: an unhealthy device returns to Healthy after this long without a new event (0s: only on recovery)."""

    def policy_for(self, shared: bool) -> str:
        """The preferred-allocation policy of a resource (``shared``: replicas or MIG devices).

        ``--allocation-policy`` sets the policy of the kind it names: ``best-effort``/``topology`` for
        whole GPUs (replicas keep the shared policy), ``distributed``/``packed`` for replicas and MIG
        devices (whole GPUs keep ``topology``). Each kind can only use its own policies.
        """
        if shared:
            if self.allocation_policy in SHARED_POLICIES:
                return self.allocation_policy
            return self.shared_devices_allocation_policy
        if self.allocation_policy in WHOLE_GPU_POLICIES:
            return self.allocation_policy
        return DEFAULT_WHOLE_GPU_POLICY

    @property
    def quiet_period_s(self) -> float:
        return durations.duration_seconds(self.health_recovery_quiet_period)


@dataclass(frozen=True, kw_only=True)
class GfdFlags:
    """``flags.gfd`` with every value resolved."""

    oneshot: bool = field(metadata=checked(strict_bool))
    no_timestamp: bool = field(metadata=checked(strict_bool, "noTimestamp"))
    sleep_interval: str = field(metadata=checked(strict_str, "sleepInterval"))
    output_file: str = field(metadata=checked(strict_str, "outputFile"))
    machine_type_file: str = field(metadata=checked(strict_str, "machineTypeFile"))

    @property
    def sleep_interval_s(self) -> float:
        return durations.duration_seconds(self.sleep_interval)


@dataclass(frozen=True, kw_only=True)
class Flags:
    """``flags`` with every value resolved."""

    mig_strategy: str = field(metadata=checked(strict_str, "migStrategy"))
    fail_on_init_error: bool = field(metadata=checked(strict_bool, "failOnInitError"))
    nvidia_driver_root: str = field(metadata=checked(strict_str, "nvidiaDriverRoot"))
    nvidia_dev_root: str = field(metadata=checked(strict_str, "nvidiaDevRoot"))
    mps_root: str = field(metadata=checked(strict_str, "mpsRoot"))
    gdrcopy_enabled: bool = field(metadata=checked(strict_bool, "gdrcopyEnabled"))
    gds_enabled: bool = field(metadata=checked(strict_bool, "gdsEnabled"))
    mofed_enabled: bool = field(metadata=checked(strict_bool, "mofedEnabled"))
    use_node_feature_api: bool = field(metadata=checked(strict_bool, "useNodeFeatureAPI"))
    device_discovery_strategy: str = field(metadata=checked(strict_str, "deviceDiscoveryStrategy"))
    plugin: PluginFlags = field(metadata=checked(model(PluginFlags)))
    gfd: GfdFlags = field(metadata=checked(model(GfdFlags)))


@dataclass(frozen=True, kw_only=True)
class Options:
    """Command-line-only settings (no config-file key), as NVIDIA keeps them outside the config."""

    config_file: str | None = None
    kubelet_socket: str = constants.KUBELET_SOCKET
    """Empty: never register with the kubelet."""
    cdi_feature_flags: tuple[str, ...] = ()
    cdi_disable_hooks: tuple[str, ...] = ()
    cdi_spec_dir: str = DEFAULT_CDI_SPEC_DIR
    machine: str | None = None
    """kubegpu: a simulated machine profile instead of NVML."""
    fault_file: str | None = None
    """kubegpu: the simulated machine's fault journal."""
    registration_retry_interval: str = "30s"
    """kubegpu: wait after a failed start before starting every resource again (NVIDIA: 30 s)."""
    socket_dir: str | None = None
    """kubegpu: where plugin sockets are created; None: beside the kubelet socket (its default directory
    when registration is off)."""
    metrics_listen: str | None = None
    """kubegpu: ``HOST:PORT`` of the plugin's own Prometheus metrics; None: not served."""

    @property
    def retry_interval_s(self) -> float:
        return durations.duration_seconds(durations.normalise_seconds(self.registration_retry_interval))


@dataclass(frozen=True, kw_only=True)
class Config:
    """The effective configuration. ``to_json()`` is a valid config file that reproduces it."""

    version: Literal["v1"] = "v1"
    flags: Flags
    resources: Resources
    sharing: Sharing
    imex: Imex
    options: Options = field(default_factory=Options)

    @property
    def sharing_strategy(self) -> Literal["none", "time-slicing", "mps"]:
        return self.sharing.strategy

    @property
    def replicated(self) -> ReplicatedResources | None:
        return self.sharing.replicated

    def to_dict(self) -> dict[str, Any]:
        """The effective config in the file's camelCase form (without the command-line-only options)."""
        return dump(self, exclude=("options",))

    def to_json(self) -> str:
        """What NVIDIA logs as "Running with config" and ``kubegpu plugin --print-config`` prints."""
        return json.dumps(self.to_dict(), indent=2)


# --- the flag table -------------------------------------------------------------------------

Kind = Literal["str", "bool", "list", "intlist", "duration", "seconds", "path"]


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag: its names, env vars (first set wins), kind, default and config-file key."""

    dest: str
    names: tuple[str, ...]
    envs: tuple[str, ...]
    kind: Kind
    help: str
    key: tuple[str, ...] | None = None  # camelCase path in the config file
    choices: tuple[str, ...] = ()
    metavar: str | None = None


def _f(
    dest: str,
    names: str,
    envs: str,
    kind: Kind,
    text: str,
    key: str | None = None,
    choices: tuple[str, ...] = (),
    metavar: str | None = None,
) -> FlagSpec:
    return FlagSpec(
        dest=dest,
        names=tuple(names.split()),
        envs=tuple(envs.split()),
        kind=kind,
        help=text,
        key=tuple(key.split(".")) if key else None,
        choices=choices,
        metavar=metavar,
    )


MIG_STRATEGY = _f(
    "mig_strategy", "--mig-strategy", "MIG_STRATEGY", "str", "none | single | mixed (default none)",
    "flags.migStrategy", MIG_STRATEGIES,
)  # fmt: skip
FAIL_ON_INIT_ERROR = _f(
    "fail_on_init_error", "--fail-on-init-error", "FAIL_ON_INIT_ERROR", "bool",
    "fail the plugin if an error is encountered during initialization (default true)", "flags.failOnInitError",
)  # fmt: skip
CONFIG_FILE = _f(
    "config_file", "--config-file", "CONFIG_FILE", "path",
    "config file (YAML or JSON, version: v1) as an alternative to flags and env vars",
)  # fmt: skip
MACHINE = _f(
    "machine", "--machine", "KUBEGPU_MACHINE", "str",
    "kubegpu: run on this simulated machine profile (or profile file) instead of NVML", metavar="PROFILE",
)  # fmt: skip

PLUGIN_FLAGS: tuple[FlagSpec, ...] = (
    MIG_STRATEGY,
    FAIL_ON_INIT_ERROR,
    _f("nvidia_driver_root", "--driver-root --nvidia-driver-root", "NVIDIA_DRIVER_ROOT", "str",
       "host root of the NVIDIA driver installation (default /)", "flags.nvidiaDriverRoot"),
    _f("nvidia_dev_root", "--dev-root --nvidia-dev-root", "NVIDIA_DEV_ROOT", "str",
       "host root of the /dev nodes (default: the driver root)", "flags.nvidiaDevRoot"),
    _f("pass_device_specs", "--pass-device-specs", "PASS_DEVICE_SPECS", "bool",
       "pass the device nodes to the kubelet in Allocate (default false)", "flags.plugin.passDeviceSpecs"),
    _f("device_list_strategy", "--device-list-strategy", "DEVICE_LIST_STRATEGY", "list",
       "envvar, volume-mounts, cdi-annotations, cdi-cri; repeat or comma-separate to combine (default envvar)",
       "flags.plugin.deviceListStrategy"),
    _f("device_id_strategy", "--device-id-strategy", "DEVICE_ID_STRATEGY", "str",
       "uuid | index: the IDs passed to the runtime (default uuid)", "flags.plugin.deviceIDStrategy"),
    _f("gdrcopy_enabled", "--gdrcopy-enabled", "GDRCOPY_ENABLED", "bool", "inject gdrcopy (default false)",
       "flags.gdrcopyEnabled"),
    _f("gds_enabled", "--gds-enabled", "GDS_ENABLED", "bool", "inject GPUDirect Storage (default false)",
       "flags.gdsEnabled"),
    _f("mofed_enabled", "--mofed-enabled", "MOFED_ENABLED", "bool", "inject MOFED (default false)",
       "flags.mofedEnabled"),
    _f("cdi_annotation_prefix", "--cdi-annotation-prefix", "CDI_ANNOTATION_PREFIX", "str",
       "prefix of CDI annotation keys (default cdi.k8s.io/)", "flags.plugin.cdiAnnotationPrefix"),
    _f("nvidia_ctk_path", "--nvidia-cdi-hook-path --nvidia-ctk-path", "NVIDIA_CDI_HOOK_PATH NVIDIA_CTK_PATH", "str",
       "the CDI hook binary written into CDI specs (default /usr/bin/nvidia-ctk)", "flags.plugin.nvidiaCTKPath"),
    _f("container_driver_root", "--driver-root-ctr-path --container-driver-root",
       "DRIVER_ROOT_CTR_PATH CONTAINER_DRIVER_ROOT", "str",
       "where the host driver root is mounted in the plugin container (default /driver-root)",
       "flags.plugin.containerDriverRoot"),
    _f("mps_root", "--mps-root", "MPS_ROOT", "str", "host directory of MPS pipes and shm; required for MPS",
       "flags.mpsRoot"),
    _f("shared_devices_allocation_policy", "--shared-devices-allocation-policy", "SHARED_DEVICES_ALLOCATION_POLICY",
       "str", "distributed | packed: preferred allocation among replicas and MIG devices (default distributed)",
       "flags.plugin.sharedDevicesAllocationPolicy"),
    _f("device_discovery_strategy", "--device-discovery-strategy", "DEVICE_DISCOVERY_STRATEGY", "str",
       "auto | nvml | tegra (default auto)", "flags.deviceDiscoveryStrategy"),
    _f("imex_channel_ids", "--imex-channel-ids", "IMEX_CHANNEL_IDS", "intlist", "IMEX channel IDs ([] or [0])",
       "imex.channelIDs"),
    _f("imex_required", "--imex-required", "IMEX_REQUIRED", "bool", "the IMEX channels are required",
       "imex.required"),
    _f("kubelet_socket", "--kubelet-socket", "KUBELET_SOCKET", "path",
       f"the kubelet's registration socket; empty: do not register (default {constants.KUBELET_SOCKET})"),
    CONFIG_FILE,
    _f("cdi_feature_flags", "--cdi-feature-flags", "CDI_FEATURE_FLAGS", "list",
       "feature flags for CDI spec generation"),
    _f("cdi_disable_hooks", "--cdi-disable-hooks", "CDI_DISABLE_HOOKS", "list",
       "CDI hooks to leave out of generated specs ('all' removes every hook)"),
    # kubegpu extras
    MACHINE,
    _f("fault_file", "--fault-file", "KUBEGPU_FAULT_FILE", "path",
       "kubegpu: the simulated machine's fault journal (default <tmp>/kubegpu-faults-<machine>.jsonl)"),
    _f("allocation_policy", "--allocation-policy", "ALLOCATION_POLICY", "str",
       "kubegpu: best-effort | topology | distributed | packed "
       "(default: topology for whole GPUs, the shared policy for replicas)", "flags.plugin.allocationPolicy"),
    _f("health_recovery_quiet_period", "--health-recovery-quiet-period", "HEALTH_RECOVERY_QUIET_PERIOD", "seconds",
       f"kubegpu: an unhealthy device becomes Healthy again after this long without a new event: seconds (300) "
       f"or a Go duration (5m); 0 = only on a recovery signal (default {DEFAULT_QUIET_PERIOD})",
       "flags.plugin.healthRecoveryQuietPeriod"),
    _f("registration_retry_interval", "--registration-retry-interval", "REGISTRATION_RETRY_INTERVAL", "seconds",
       "kubegpu: after a failed start, start every resource again after this long: seconds or a Go duration "
       "(default 30s, as NVIDIA)"),
    _f("cdi_spec_dir", "--cdi-spec-dir", "CDI_SPEC_DIR", "path",
       f"kubegpu: where CDI specs are written (default {DEFAULT_CDI_SPEC_DIR})"),
    _f("socket_dir", "--socket-dir", "KUBEGPU_SOCKET_DIR", "path",
       "kubegpu: where the plugin sockets nvidia-<resource>.sock are created "
       f"(default: beside the kubelet socket, or {constants.DEVICE_PLUGIN_PATH} without one)"),
    _f("metrics_listen", "--metrics-listen", "KUBEGPU_METRICS_LISTEN", "str",
       "kubegpu: serve the plugin's Prometheus metrics on HOST:PORT (/metrics); default off",
       metavar="HOST:PORT"),
)  # fmt: skip

GFD_FLAGS: tuple[FlagSpec, ...] = (
    _f("mig_strategy", "--mig-strategy", "GFD_MIG_STRATEGY MIG_STRATEGY", "str",
       "none | single | mixed (default none)", "flags.migStrategy", MIG_STRATEGIES),
    _f("fail_on_init_error", "--fail-on-init-error", "GFD_FAIL_ON_INIT_ERROR FAIL_ON_INIT_ERROR", "bool",
       "fail if the GPUs cannot be read (default true)", "flags.failOnInitError"),
    _f("oneshot", "--oneshot", "GFD_ONESHOT", "bool", "label once and exit (default false)", "flags.gfd.oneshot"),
    _f("no_timestamp", "--no-timestamp", "GFD_NO_TIMESTAMP", "bool", "leave out the timestamp label",
       "flags.gfd.noTimestamp"),
    _f("sleep_interval", "--sleep-interval", "GFD_SLEEP_INTERVAL", "duration",
       "time between labellings: a Go duration (60s, 1m30s) or 'infinite' (default 60s)", "flags.gfd.sleepInterval"),
    _f("output_file", "--output-file --output -o", "GFD_OUTPUT_FILE", "str",
       f"feature file to write, '-' for stdout (default {DEFAULT_GFD_OUTPUT})", "flags.gfd.outputFile"),
    _f("machine_type_file", "--machine-type-file", "GFD_MACHINE_TYPE_FILE", "str",
       f"file holding the machine type (default {DEFAULT_MACHINE_TYPE_FILE}; simulated machines use their profile's)",
       "flags.gfd.machineTypeFile"),
    _f("config_file", "--config-file", "GFD_CONFIG_FILE CONFIG_FILE", "path", "config file (YAML or JSON)"),
    MACHINE,
)  # fmt: skip

MPS_FLAGS: tuple[FlagSpec, ...] = (
    CONFIG_FILE,
    MIG_STRATEGY,
    _f("mps_root", "--mps-root", "MPS_ROOT", "str",
       f"directory of MPS pipes, logs and readiness files (helm: {DEFAULT_MPS_ROOT_HELM})", "flags.mpsRoot"),
    MACHINE,
)  # fmt: skip

#: Defaults, in the config file's shape. The lowest layer of the precedence.
DEFAULTS: dict[str, Any] = {
    "version": "v1",
    "flags": {
        "migStrategy": "none",
        "failOnInitError": True,
        "nvidiaDriverRoot": "/",
        "nvidiaDevRoot": "",
        "mpsRoot": "",
        "gdrcopyEnabled": False,
        "gdsEnabled": False,
        "mofedEnabled": False,
        "useNodeFeatureAPI": True,
        "deviceDiscoveryStrategy": "auto",
        "plugin": {
            "passDeviceSpecs": False,
            "deviceListStrategy": ["envvar"],
            "deviceIDStrategy": "uuid",
            "cdiAnnotationPrefix": "cdi.k8s.io/",
            "nvidiaCTKPath": "/usr/bin/nvidia-ctk",
            "containerDriverRoot": "/driver-root",
            "sharedDevicesAllocationPolicy": "distributed",
            "healthRecoveryQuietPeriod": DEFAULT_QUIET_PERIOD,
        },
        "gfd": {
            "oneshot": False,
            "noTimestamp": False,
            "sleepInterval": "1m0s",
            "outputFile": DEFAULT_GFD_OUTPUT,
            "machineTypeFile": DEFAULT_MACHINE_TYPE_FILE,
        },
    },
    "resources": {},
    "sharing": {},
    "imex": {},
}


# --- argparse -------------------------------------------------------------------------------


def _bool_arg(text: str) -> bool:
    try:
        return boolean.parse_bool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration_arg(text: str) -> str:
    try:
        return durations.normalise_duration(text, allow_infinite=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds_arg(text: str) -> str:
    try:
        return durations.normalise_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _intlist_item(text: str) -> list[int]:
    try:
        return [int(x) for x in _split(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer list {text!r}") from None


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


_METAVAR = {
    "seconds": "DURATION",
    "str": "VALUE",
    "bool": "true|false",
    "list": "LIST",
    "intlist": "IDS",
    "duration": "DURATION",
    "path": "PATH",
}


def add_flags(parser: argparse.ArgumentParser, specs: Sequence[FlagSpec]) -> None:
    """Add ``specs`` to ``parser`` (defaults stay None so "not given" is visible to :func:`resolve`)."""
    for spec in specs:
        env = f" [env {', '.join(spec.envs)}]" if spec.envs else ""
        common: dict[str, Any] = {"dest": spec.dest, "default": None, "help": spec.help + env}
        common["metavar"] = spec.metavar or _METAVAR[spec.kind]
        if spec.kind == "bool":
            parser.add_argument(*spec.names, nargs="?", const=True, type=_bool_arg, **common)
        elif spec.kind == "list":
            parser.add_argument(*spec.names, action="append", type=_split, **common)
        elif spec.kind == "intlist":
            parser.add_argument(*spec.names, action="append", type=_intlist_item, **common)
        elif spec.kind == "duration":
            parser.add_argument(*spec.names, type=_duration_arg, **common)
        elif spec.kind == "seconds":
            parser.add_argument(*spec.names, type=_seconds_arg, **common)
        else:
            parser.add_argument(*spec.names, **common)


def plugin_flags(*dests: str) -> tuple[FlagSpec, ...]:
    """The plugin flags with these destinations, for commands that take a subset (``kubegpu cdi generate``)."""
    unknown = set(dests) - {s.dest for s in PLUGIN_FLAGS}
    if unknown:
        raise ValueError(f"no plugin flags {sorted(unknown)}")
    return tuple(s for s in PLUGIN_FLAGS if s.dest in dests)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``nvidia-device-plugin`` flag (and kubegpu's extras) to ``parser``. Defaults stay ``None``
    so :func:`load` can tell "not given" from "given the default"."""
    add_flags(parser, PLUGIN_FLAGS)


def add_gfd_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``gpu-feature-discovery`` flags used by ``kubegpu labels``."""
    add_flags(parser, GFD_FLAGS)


def add_mps_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``mps-control-daemon`` flags used by ``kubegpu mps-daemon``."""
    add_flags(parser, MPS_FLAGS)


# --- precedence -----------------------------------------------------------------------------


def _env_value(spec: FlagSpec, environ: Mapping[str, str]) -> tuple[str, Any] | None:
    """(env var name, parsed value) of the first env var of ``spec`` that is set, or None."""
    for name in spec.envs:
        if name not in environ:
            continue
        raw = environ[name]
        try:
            if spec.kind == "bool":
                return name, boolean.parse_bool(raw.strip())
            if spec.kind == "list":
                return name, _split(raw)
            if spec.kind == "intlist":
                return name, [int(x) for x in _split(raw)]
            if spec.kind == "duration":
                return name, durations.normalise_duration(raw, allow_infinite=True)
            if spec.kind == "seconds":
                return name, durations.normalise_seconds(raw)
        except ValueError as exc:
            raise ConfigError(f"env {name}: {exc}") from None
        return name, raw
    return None


def _cli_value(spec: FlagSpec, args: argparse.Namespace) -> Any:
    value = getattr(args, spec.dest, None)
    if value is not None and spec.kind in ("list", "intlist"):
        value = [item for chunk in value for item in chunk]
    return value


def _given(spec: FlagSpec, args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    """The value of ``spec`` from the command line, else its env var, else None."""
    value = _cli_value(spec, args)
    if value is not None:
        return value
    env = _env_value(spec, environ)
    return None if env is None else env[1]


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _set(data: dict[str, Any], key: Sequence[str], value: Any) -> None:
    node = data
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


def read_config_file(path: str) -> v1.ConfigFile:
    """Read and parse ``path``; a missing or unreadable file is a :class:`ConfigError` naming it."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"unable to parse config file: error opening config file {path}: {exc.strerror}") from None
    return v1.parse_text(text, source=path)


def resolve(
    specs: Sequence[FlagSpec],
    args: argparse.Namespace,
    environ: Mapping[str, str],
    file: v1.ConfigFile | None = None,
) -> Config:
    """Apply the precedence (CLI > env > file > default) and NVIDIA's post-processing; validate nothing else.

    ``file`` is the parsed config file (None: none given). Pure: :func:`load` does the reading.
    """
    file_data = {} if file is None else file.to_dict()
    # A deep copy: the overlays below write into nested dicts, which must not be DEFAULTS' own.
    data = _merge(copy.deepcopy(DEFAULTS), file_data)
    options: dict[str, Any] = {}
    for spec in specs:
        value = _given(spec, args, environ)
        if value is None:
            continue
        if spec.key is None:
            options[spec.dest] = tuple(value) if isinstance(value, list) else value
        else:
            _set(data, spec.key, value)
    flags = data["flags"]
    # NVIDIA: an unset (or empty) dev root is the driver root.
    if not flags.get("nvidiaDevRoot"):
        flags["nvidiaDevRoot"] = flags["nvidiaDriverRoot"]
    mps = data["sharing"].get("mps")
    if mps is not None and mps.get("failRequestsGreaterThanOne") is None:
        mps["failRequestsGreaterThanOne"] = True
    data["resources"] = _default_resources(data["resources"], str(flags["migStrategy"]))
    try:
        # Re-validating the merged document checks env and flag values with the file's rules.
        merged = validate(v1.ConfigFile, {k: v for k, v in data.items() if k != "flags"} | {"flags": {}})
        resolved_flags = validate(Flags, flags)
    except Invalid as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    return Config(
        flags=resolved_flags,
        resources=merged.resources,
        sharing=merged.sharing,
        imex=merged.imex,
        options=Options(**options),
    )


def _default_resources(resources: Mapping[str, Any], mig_strategy: str) -> dict[str, Any]:
    """NVIDIA appends ``{pattern: "*", name: nvidia.com/gpu}`` for GPUs (and for MIG under single).

    Appended only when no catch-all is there yet, so loading an effective config again changes nothing.
    Mixed-strategy MIG defaults depend on the machine (one resource per profile): see ``resource_map``.
    """
    out = {"gpus": list(resources.get("gpus", [])), "mig": list(resources.get("mig", []))}
    catch_all = {"pattern": "*", "name": "nvidia.com/gpu"}
    if not any(r.get("pattern") == "*" for r in out["gpus"]):
        out["gpus"].append(catch_all)
    if mig_strategy == "single" and not any(r.get("pattern") == "*" for r in out["mig"]):
        out["mig"].append(catch_all)
    return out


def validate_flags(config: Config) -> None:
    """NVIDIA's checks at (re)start, with its texts, prefixed "unable to validate flags: "."""
    problem = _flag_problem(config)
    if problem:
        raise ConfigError(f"unable to validate flags: {problem}")


def _flag_problem(config: Config) -> str | None:
    plugin = config.flags.plugin
    strategies = plugin.device_list_strategy
    if not strategies:
        return (
            "invalid --device-list-strategy option: no device list strategy specified; "
            f"at least one of [{' '.join(DEVICE_LIST_STRATEGIES)}] is required"
        )
    for strategy in strategies:
        if strategy not in DEVICE_LIST_STRATEGIES:
            return f"invalid --device-list-strategy option: invalid strategy: {strategy}"
    if plugin.device_id_strategy not in DEVICE_ID_STRATEGIES:
        return f"invalid --device-id-strategy option: {plugin.device_id_strategy}"
    if config.sharing_strategy == "mps":
        if config.flags.mig_strategy == "mixed":
            return "using --mig-strategy=mixed is not supported with MPS"
        if not config.flags.mps_root:
            return "using MPS requires --mps-root to be specified"
    if config.flags.device_discovery_strategy not in DISCOVERY_STRATEGIES:
        return f"invalid --device-discovery-strategy option {config.flags.device_discovery_strategy}"
    if config.flags.mig_strategy not in MIG_STRATEGIES:
        return f"unknown MIG strategy: {config.flags.mig_strategy}"
    ids = list(config.imex.channel_ids)
    if ids not in ([], [0]):
        return f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {ids}"
    if plugin.shared_devices_allocation_policy not in SHARED_POLICIES:
        return f"invalid --shared-devices-allocation-policy option: {plugin.shared_devices_allocation_policy}"
    if plugin.allocation_policy is not None and plugin.allocation_policy not in ALLOCATION_POLICIES:
        return (
            f"invalid --allocation-policy option: {plugin.allocation_policy} "
            f"(choose from {', '.join(ALLOCATION_POLICIES)})"
        )
    if plugin.quiet_period_s < 0:
        return f"invalid --health-recovery-quiet-period option: {plugin.health_recovery_quiet_period} is negative"
    socket = config.options.kubelet_socket
    if socket and (socket.endswith("/") or Path(socket).name in ("", ".", "..")):
        return f"invalid --kubelet-socket option: {socket!r} needs the socket file's path, e.g. .../kubelet.sock"
    if config.options.metrics_listen is not None:
        try:
            parse_listen(config.options.metrics_listen)
        except ValueError as exc:
            return f"invalid --metrics-listen option: {exc}"
    return None


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9401``, ``:9401`` = every address) as (host, port); ValueError naming the problem."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT with a port from 1 to 65535")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def _config_path(specs: Sequence[FlagSpec], args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    for spec in specs:
        if spec.dest == "config_file":
            value = _given(spec, args, environ)
            return str(value) if value else None
    return None


def load_flags(specs: Sequence[FlagSpec], args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """Read the config file named by ``specs``' ``--config-file`` (if any) and :func:`resolve`; no validation."""
    path = _config_path(specs, args, environ)
    file = read_config_file(path) if path else None
    return resolve(specs, args, environ, file)


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The plugin's effective config from parsed flags (:func:`add_arguments`), env and the config file.

    Raises :class:`ConfigError` (the CLI exits 2 on it) for a bad file, env value or flag.
    """
    config = load_flags(PLUGIN_FLAGS, args, environ)
    validate_flags(config)
    return config


def load_gfd(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The labeller's effective config (:func:`add_gfd_arguments`). Checks the MIG strategy only."""
    config = load_flags(GFD_FLAGS, args, environ)
    if config.flags.mig_strategy not in MIG_STRATEGIES:
        raise ConfigError(f"unable to validate flags: unknown MIG strategy: {config.flags.mig_strategy}")
    return config


def load_mps(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The MPS daemon's effective config (:func:`add_mps_arguments`)."""
    config = load_flags(MPS_FLAGS, args, environ)
    if config.flags.mig_strategy not in MIG_STRATEGIES:
        raise ConfigError(f"unable to validate flags: unknown MIG strategy: {config.flags.mig_strategy}")
    return config


def parser(prog: str = "kubegpu plugin") -> argparse.ArgumentParser:
    """A parser with the plugin's flags and ``--print-config`` (``kubegpu plugin`` uses it)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="The NVIDIA k8s-device-plugin compatible device plugin: advertises GPUs, MIG devices and "
        "shared replicas to the kubelet, keeps their health, answers Allocate and GetPreferredAllocation. "
        "Flags > env vars > --config-file > defaults. SIGHUP re-reads the config and restarts; SIGTERM stops.",
    )
    add_arguments(p)
    p.add_argument("--print-config", action="store_true", help="print the effective config as JSON and exit")
    return p
