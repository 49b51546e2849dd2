"""Every flag of the plugin, the labeller and the MPS daemon, declared once.

Owns, per flag, the one declaration everything else is derived from: its field in
:class:`Flags` (``flags`` of the config file) or :class:`Options` (command line and
env only), with its type, default, file key and check, and — in the same
:func:`flag`/:func:`option` call — its command-line names, env vars (first set
wins), kind, help text and the programs that take it (``kubegpu plugin``,
``kubegpu labels``, ``kubegpu mps-daemon``). The file model
(:mod:`kubegpu.deviceplugin.config.v1`) validates a file's ``flags`` section
against these same classes with every key optional; the flag tables and the
precedence (:mod:`kubegpu.deviceplugin.config.effective`) read the rest from here.
Also the value sets NVIDIA validates at start and the policy names, which are
:mod:`kubegpu.placement`'s. Pure: no files, no environment, no argparse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from kubegpu.api import constants
from kubegpu.common import durations
from kubegpu.common.validation import (
    Check,
    before,
    checked,
    document_key,
    model,
    nullable,
    strict_bool,
    strict_str,
    tuple_of,
)
from kubegpu.placement import names as policy_names

DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
MIG_STRATEGIES = ("none", "single", "mixed")
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")
#: GFD's ``--device-discovery-strategy`` values: the plugin's and ``vfio`` (GPUs bound to vfio-pci).
GFD_DISCOVERY_STRATEGIES = (*DISCOVERY_STRATEGIES, "vfio")
#: Policies for replicas and MIG devices (NVIDIA's ``--shared-devices-allocation-policy``).
SHARED_POLICIES = policy_names.SHARED_POLICIES
#: Policies for whole GPUs, the default first.
WHOLE_GPU_POLICIES = policy_names.WHOLE_GPU_POLICIES
DEFAULT_WHOLE_GPU_POLICY = policy_names.DEFAULT_WHOLE_GPU_POLICY
#: ``--allocation-policy`` values: GPU-level policies and the two replica policies.
ALLOCATION_POLICIES = (policy_names.BEST_EFFORT, policy_names.TOPOLOGY, *policy_names.SHARED_POLICIES)
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"
DEFAULT_MPS_ROOT_HELM = "/run/nvidia/mps"
#: Where NVIDIA's chart mounts the MPS root in the plugin, the MPS daemon and client containers (``mps.ContainerRoot``).
MPS_CONTAINER_ROOT = "/mps"
DEFAULT_QUIET_PERIOD = "0s"
#: ``--health-recovery-xids`` words besides XID numbers: double-bit ECC errors, failed event waits, every class.
ECC_CLASS = "ecc"
WAIT_CLASS = "wait"
ALL_CLASSES = "all"


def recovery_classes(text: str) -> frozenset[str] | None:
    """``--health-recovery-xids``: None for ``all``, else the XID numbers and words given; ValueError on others."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if ALL_CLASSES in items:
        return None
    for item in items:
        if not (item.isdigit() or item in (ECC_CLASS, WAIT_CLASS)):
            raise ValueError(f"{item!r} is not an XID number, {ECC_CLASS}, {WAIT_CLASS} or {ALL_CLASSES}")
    return frozenset(str(int(i)) if i.isdigit() else i for i in items)


def gpu_milli_selection(text: str) -> str | tuple[str, ...]:
    """``--gpu-milli``: ``"all"``, or the GPU indices/UUIDs listed; ValueError naming what is wrong."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError("empty: give all, or GPU indices/UUIDs")
    if items == [ALL_CLASSES]:
        return ALL_CLASSES
    for item in items:
        if not (item.isdigit() or item.startswith("GPU-")):
            raise ValueError(f"{item!r} is neither a GPU index nor a GPU UUID (GPU-…)")
    return tuple(dict.fromkeys(items))


def gpu_milli_problem(text: str) -> str | None:
    """What is wrong with a ``--gpu-milli`` value (None: nothing)."""
    try:
        gpu_milli_selection(text)
    except ValueError as exc:
        return str(exc)
    return None


DEFAULT_GFD_OUTPUT = "/etc/kubernetes/node-feature-discovery/features.d/gfd"
DEFAULT_MACHINE_TYPE_FILE = "/sys/class/dmi/id/product_name"

#: How a flag's text becomes a value on the command line and in env vars.
Kind = Literal["str", "bool", "list", "intlist", "duration", "seconds", "path"]
#: The commands that take flags from this table.
Program = Literal["plugin", "gfd", "mps"]
PLUGIN: tuple[Program, ...] = ("plugin",)

_CLI = "kubegpu.flag"


@dataclass(frozen=True)
class Cli:
    """How one flag is given: names, env vars per program (first set wins), kind, help, programs."""

    names: tuple[str, ...]
    envs: tuple[str, ...]
    kind: Kind
    help: str
    programs: tuple[Program, ...] = PLUGIN
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    #: Env vars of a program that reads others than ``envs`` (GFD prefixes its own with ``GFD_``).
    program_envs: tuple[tuple[Program, tuple[str, ...]], ...] = ()
    #: Help of a program whose flag means something else there (GFD's ``--node-name``).
    program_help: tuple[tuple[Program, str], ...] = ()

    def envs_for(self, program: Program) -> tuple[str, ...]:
        return dict(self.program_envs).get(program, self.envs)

    def help_for(self, program: Program) -> str:
        return dict(self.program_help).get(program, self.help)


def _cli(
    names: str,
    envs: str,
    kind: Kind,
    text: str,
    programs: tuple[Program, ...],
    choices: tuple[str, ...],
    metavar: str | None,
    gfd_envs: str | None,
    gfd_help: str | None = None,
) -> Cli:
    return Cli(
        names=tuple(names.split()),
        envs=tuple(envs.split()),
        kind=kind,
        help=text,
        programs=programs,
        choices=choices,
        metavar=metavar,
        program_envs=(("gfd", tuple(gfd_envs.split())),) if gfd_envs is not None else (),
        program_help=(("gfd", gfd_help),) if gfd_help else (),
    )


def flag(
    default: Any,
    check: Check,
    key: str | None,
    names: str,
    envs: str,
    kind: Kind,
    text: str,
    *,
    programs: tuple[Program, ...] = PLUGIN,
    choices: tuple[str, ...] = (),
    metavar: str | None = None,
    gfd_envs: str | None = None,
) -> Any:
    """A field of the config file's ``flags`` that is also a command-line flag (``key``: its file key)."""
    metadata = checked(check, key) | {_CLI: _cli(names, envs, kind, text, programs, choices, metavar, gfd_envs)}
    return field(default=default, metadata=metadata)


def option(
    default: Any,
    names: str,
    envs: str,
    kind: Kind,
    text: str,
    *,
    programs: tuple[Program, ...] = PLUGIN,
    metavar: str | None = None,
    gfd_envs: str | None = None,
    gfd_help: str | None = None,
) -> Any:
    """A command-line-only setting (no config-file key)."""
    cli = _cli(names, envs, kind, text, programs, (), metavar, gfd_envs, gfd_help)
    return field(default=default, metadata={_CLI: cli})


def cli_of(f: dataclasses.Field[Any]) -> Cli | None:
    """The command-line declaration of a field, None for fields that are no flag."""
    declared: Cli | None = f.metadata.get(_CLI)
    return declared


def _one_or_many(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


def _sleep_interval(value: Any) -> str:
    return durations.normalise_duration(value, allow_infinite=True)


_STR = strict_str
_BOOL = strict_bool


@dataclass(frozen=True, kw_only=True)
class PluginFlags:
    """``flags.plugin``."""

    pass_device_specs: bool = flag(
        False, _BOOL, "passDeviceSpecs", "--pass-device-specs", "PASS_DEVICE_SPECS", "bool",
        "pass the device nodes to the kubelet in Allocate (default false)",
    )  # fmt: skip
    """Return DeviceSpecs (control nodes, /dev/nvidiaN, MIG caps); needed with CPUManager static policy."""
    device_list_strategy: tuple[str, ...] = flag(
        ("envvar",), before(_one_or_many, tuple_of(strict_str)), "deviceListStrategy",
        "--device-list-strategy", "DEVICE_LIST_STRATEGY", "list",
        "envvar, volume-mounts, cdi-annotations, cdi-cri; repeat or comma-separate to combine (default envvar)",
    )  # fmt: skip
    """How the device list reaches the runtime: envvar, volume-mounts, cdi-annotations, cdi-cri (combinable)."""
    device_id_strategy: str = flag(
        "uuid", _STR, "deviceIDStrategy", "--device-id-strategy", "DEVICE_ID_STRATEGY", "str",
        "uuid | index: the IDs passed to the runtime (default uuid)",
    )  # fmt: skip
    """IDs given to the runtime: uuid or index (kubelet always sees UUIDs)."""
    cdi_annotation_prefix: str = flag(
        "cdi.k8s.io/", _STR, "cdiAnnotationPrefix", "--cdi-annotation-prefix", "CDI_ANNOTATION_PREFIX", "str",
        "prefix of CDI annotation keys (default cdi.k8s.io/)",
    )  # fmt: skip
    nvidia_ctk_path: str = flag(
        "/usr/bin/nvidia-ctk", _STR, "nvidiaCTKPath", "--nvidia-cdi-hook-path --nvidia-ctk-path",
        "NVIDIA_CDI_HOOK_PATH NVIDIA_CTK_PATH", "str",
        "the CDI hook binary written into CDI specs (default /usr/bin/nvidia-ctk)",
    )  # fmt: skip
    """The CDI hook binary written into CDI specs."""
    container_driver_root: str = flag(
        "/driver-root", _STR, "containerDriverRoot", "--driver-root-ctr-path --container-driver-root",
        "DRIVER_ROOT_CTR_PATH CONTAINER_DRIVER_ROOT", "str",
        "where the host driver root is mounted in the container; libnvidia-ml.so.1 is searched under it "
        "(default /driver-root)",
        programs=("plugin", "gfd"),
    )  # fmt: skip
    """Where the host driver root is mounted inside the plugin container."""
    shared_devices_allocation_policy: str = flag(
        policy_names.DEFAULT_SHARED_POLICY, _STR, "sharedDevicesAllocationPolicy", "--shared-devices-allocation-policy",
        "SHARED_DEVICES_ALLOCATION_POLICY", "str",
        "distributed | packed: preferred allocation among replicas and MIG devices (default distributed)",
    )  # fmt: skip
    """Preferred-allocation policy for replicas and MIG devices: distributed or packed."""
    allocation_policy: str | None = flag(
        None, nullable(strict_str), "allocationPolicy", "--allocation-policy", "ALLOCATION_POLICY", "str",
        "kubegpu: best-effort | topology | distributed | packed "
        "(default: topology for whole GPUs, the shared policy for replicas)",
    )  # fmt: skip
    """kubegpu: preferred-allocation policy; unset = topology for whole GPUs, the shared policy for replicas."""
    gpu_milli: str | None = flag(
        None, nullable(strict_str), "gpuMilli", "--gpu-milli", "GPU_MILLI", "str",
        "kubegpu: advertise these GPUs as kubegpu.io/gpu-milli, 1000 units each, instead of nvidia.com/gpu: all, "
        "or GPU indices/UUIDs, comma-separated (default off)",
    )  # fmt: skip
    """kubegpu: which whole GPUs are advertised as ``kubegpu.io/gpu-milli`` units (None: none)."""
    health_recovery_quiet_period: str = flag(
        DEFAULT_QUIET_PERIOD, before(durations.normalise_seconds), "healthRecoveryQuietPeriod",
        "--health-recovery-quiet-period", "HEALTH_RECOVERY_QUIET_PERIOD", "seconds",
        "kubegpu: opt-in automatic recovery: an unhealthy device of a --health-recovery-xids class becomes Healthy "
        "again after this long without a new event: seconds (300) or a Go duration (5m); 0 (default, as NVIDIA) = "
        "only a recovery signal or a restart heals",
    )  # fmt: skip
    """kubegpu: an unhealthy device returns to Healthy after this long without a new event (0s: only on recovery)."""
    health_recovery_xids: str = flag(
        "all", strict_str, "healthRecoveryXids", "--health-recovery-xids", "HEALTH_RECOVERY_XIDS", "str",
        "kubegpu: the fault classes the quiet period heals: XID numbers, ecc (double-bit ECC), wait (failed event "
        "waits), or all (default); a lost GPU (XID 79) never heals by waiting",
    )  # fmt: skip
    """kubegpu: which fault classes ``health_recovery_quiet_period`` heals (XIDs, ``ecc``, ``wait``, ``all``)."""

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
    """``flags.gfd``: the labeller's own flags."""

    oneshot: bool = flag(
        False, _BOOL, None, "--oneshot", "GFD_ONESHOT", "bool", "label once and exit (default false)",
        programs=("gfd",),
    )  # fmt: skip
    no_timestamp: bool = flag(
        False, _BOOL, "noTimestamp", "--no-timestamp", "GFD_NO_TIMESTAMP", "bool", "leave out the timestamp label",
        programs=("gfd",),
    )  # fmt: skip
    sleep_interval: str = flag(
        "1m0s", before(_sleep_interval), "sleepInterval", "--sleep-interval", "GFD_SLEEP_INTERVAL", "duration",
        "time between labellings: a Go duration (60s, 1m30s) or 'infinite' (default 60s)", programs=("gfd",),
    )  # fmt: skip
    output_file: str = flag(
        DEFAULT_GFD_OUTPUT, _STR, "outputFile", "--output-file --output -o", "GFD_OUTPUT_FILE", "str",
        f"feature file to write with --use-node-feature-api=false, '' or '-' for stdout (default {DEFAULT_GFD_OUTPUT})",
        programs=("gfd",),
    )  # fmt: skip
    machine_type_file: str = flag(
        DEFAULT_MACHINE_TYPE_FILE, _STR, "machineTypeFile", "--machine-type-file", "GFD_MACHINE_TYPE_FILE", "str",
        f"file holding the machine type (default {DEFAULT_MACHINE_TYPE_FILE}; simulated machines use their profile's)",
        programs=("gfd",),
    )  # fmt: skip

    @property
    def sleep_interval_s(self) -> float:
        return durations.duration_seconds(self.sleep_interval)


@dataclass(frozen=True, kw_only=True)
class Flags:
    """``flags`` of the config file: shared by the plugin, the labeller and the MPS daemon."""

    mig_strategy: str = flag(
        "none", _STR, "migStrategy", "--mig-strategy", "MIG_STRATEGY", "str", "none | single | mixed (default none)",
        programs=("plugin", "gfd", "mps"), choices=MIG_STRATEGIES, gfd_envs="GFD_MIG_STRATEGY MIG_STRATEGY",
    )  # fmt: skip
    fail_on_init_error: bool = flag(
        True, _BOOL, "failOnInitError", "--fail-on-init-error", "FAIL_ON_INIT_ERROR", "bool",
        "fail if an error is encountered during initialization, e.g. the GPUs cannot be read (default true)",
        programs=("plugin", "gfd"), gfd_envs="GFD_FAIL_ON_INIT_ERROR FAIL_ON_INIT_ERROR",
    )  # fmt: skip
    # mpsRoot before nvidiaDriverRoot: NVIDIA's CommandLineFlags order, which its logged JSON keeps.
    mps_root: str = flag(
        "", _STR, "mpsRoot", "--mps-root", "MPS_ROOT", "str",
        "host directory of MPS pipes, logs, shm and readiness files, put into containers' mounts; required for MPS "
        f"(helm: {DEFAULT_MPS_ROOT_HELM}); the plugin and the daemon see it at --mps-container-root",
    )  # fmt: skip
    nvidia_driver_root: str = flag(
        "/", _STR, "nvidiaDriverRoot", "--driver-root --nvidia-driver-root", "NVIDIA_DRIVER_ROOT", "str",
        "host root of the NVIDIA driver installation (default /)",
    )  # fmt: skip
    nvidia_dev_root: str = flag(
        "", _STR, "nvidiaDevRoot", "--dev-root --nvidia-dev-root", "NVIDIA_DEV_ROOT", "str",
        "host root of the /dev nodes (default: the driver root)",
    )  # fmt: skip
    gdrcopy_enabled: bool = flag(
        False, _BOOL, "gdrcopyEnabled", "--gdrcopy-enabled", "GDRCOPY_ENABLED", "bool", "inject gdrcopy (default false)"
    )
    gds_enabled: bool = flag(
        False, _BOOL, "gdsEnabled", "--gds-enabled", "GDS_ENABLED", "bool", "inject GPUDirect Storage (default false)"
    )
    mofed_enabled: bool = flag(
        False, _BOOL, "mofedEnabled", "--mofed-enabled", "MOFED_ENABLED", "bool", "inject MOFED (default false)"
    )
    use_node_feature_api: bool = flag(
        True, _BOOL, "useNodeFeatureAPI", "--use-node-feature-api", "USE_NODE_FEATURE_API", "bool",
        "publish the labels as the NodeFeature object nvidia-features-for-<node> (nfd.k8s-sigs.io/v1alpha1) "
        "through the API instead of writing --output-file (default true, as GFD v0.20)",
        programs=("gfd",), gfd_envs="GFD_USE_NODE_FEATURE_API USE_NODE_FEATURE_API",
    )  # fmt: skip
    """GFD: NodeFeature object (true) or NFD feature file (false); the plugin ignores it."""
    device_discovery_strategy: str = flag(
        "auto", _STR, "deviceDiscoveryStrategy", "--device-discovery-strategy", "DEVICE_DISCOVERY_STRATEGY", "str",
        "auto | nvml | tegra (default auto)", programs=("plugin", "gfd"),
    )  # fmt: skip
    plugin: PluginFlags = field(default_factory=PluginFlags, metadata=checked(model(PluginFlags)))
    gfd: GfdFlags = field(default_factory=GfdFlags, metadata=checked(model(GfdFlags)))


@dataclass(frozen=True, kw_only=True)
class Options:
    """Command-line-only settings (no config-file key), as NVIDIA keeps them outside the config."""

    config_file: str | None = option(
        None, "--config-file", "CONFIG_FILE", "path",
        "config file (YAML or JSON, version: v1) as an alternative to flags and env vars",
        programs=("plugin", "gfd", "mps"), gfd_envs="GFD_CONFIG_FILE CONFIG_FILE",
    )  # fmt: skip
    kubelet_socket: str = option(
        constants.KUBELET_SOCKET, "--kubelet-socket", "KUBELET_SOCKET", "path",
        f"the kubelet's registration socket; empty: do not register (default {constants.KUBELET_SOCKET})",
    )  # fmt: skip
    """Empty: never register with the kubelet."""
    cdi_feature_flags: tuple[str, ...] = option(
        (), "--cdi-feature-flags", "CDI_FEATURE_FLAGS", "list", "feature flags for CDI spec generation"
    )
    cdi_disable_hooks: tuple[str, ...] = option(
        (), "--cdi-disable-hooks", "CDI_DISABLE_HOOKS", "list",
        "CDI hooks to leave out of generated specs ('all' removes every hook)",
    )  # fmt: skip
    cdi_spec_dir: str = option(
        DEFAULT_CDI_SPEC_DIR, "--cdi-spec-dir", "CDI_SPEC_DIR", "path",
        f"kubegpu: where CDI specs are written (default {DEFAULT_CDI_SPEC_DIR})",
    )  # fmt: skip
    machine: str | None = option(
        None, "--machine", "KUBEGPU_MACHINE", "str",
        "kubegpu: run on this simulated machine profile (or profile file) instead of NVML",
        programs=("plugin", "gfd", "mps"), metavar="PROFILE",
    )  # fmt: skip
    """kubegpu: a simulated machine profile instead of NVML."""
    fault_file: str | None = option(
        None, "--fault-file", "KUBEGPU_FAULT_FILE", "path",
        "kubegpu: the simulated machine's fault journal (default <tmp>/kubegpu-faults-<machine>.jsonl)",
    )  # fmt: skip
    """kubegpu: the simulated machine's fault journal."""
    registration_retry_interval: str = option(
        "30s", "--registration-retry-interval", "REGISTRATION_RETRY_INTERVAL", "seconds",
        "kubegpu: after a failed start, start every resource again after this long: seconds or a Go duration "
        "(default 30s, as NVIDIA)",
    )  # fmt: skip
    """kubegpu: wait after a failed start before starting every resource again (NVIDIA: 30 s)."""
    socket_dir: str | None = option(
        None, "--socket-dir", "KUBEGPU_SOCKET_DIR", "path",
        "kubegpu: where the plugin sockets nvidia-<resource>.sock are created "
        f"(default: beside the kubelet socket, or {constants.DEVICE_PLUGIN_PATH} without one)",
    )  # fmt: skip
    """kubegpu: where plugin sockets are created; None: beside the kubelet socket (its default directory
    when registration is off)."""
    metrics_listen: str | None = option(
        None, "--metrics-listen", "KUBEGPU_METRICS_LISTEN", "str",
        "kubegpu: serve the plugin's Prometheus metrics on HOST:PORT (/metrics); default off", metavar="HOST:PORT",
    )  # fmt: skip
    """kubegpu: ``HOST:PORT`` of the plugin's own Prometheus metrics; None: not served."""
    node_name: str | None = option(
        None, "--node-name", "KUBEGPU_NODE_NAME", "str",
        "kubegpu: publish this node's GPUs (annotation kubegpu.io/gpus) on the Node so named and honour the "
        "scheduler's pick (kubegpu.io/gpu-devices on its pods); default off (KUBEGPU_NODE_NAME from the downward API)",
        metavar="NAME", programs=("plugin", "gfd"), gfd_envs="NODE_NAME",
        gfd_help="the node to label: the NodeFeature object is nvidia-features-for-<node> (required with "
        "--use-node-feature-api; NODE_NAME from the downward API)",
    )  # fmt: skip
    """kubegpu: the Node to publish the GPUs on and whose pods' picks to honour; None: neither.
    GFD: the node the NodeFeature object describes."""
    kubeconfig: str | None = option(
        None, "--kubeconfig", "", "path",
        "kubegpu: the cluster of --node-name (default $KUBECONFIG, else the in-cluster service account)",
        programs=("plugin", "gfd"), gfd_envs="KUBECONFIG",
        gfd_help="kubeconfig of the cluster the NodeFeature object is written to (default: the in-cluster "
        "service account)",
    )  # fmt: skip
    """kubegpu: kubeconfig for ``node_name``'s API calls; None: ``$KUBECONFIG`` or in-cluster."""
    namespace: str = option(
        "default", "--namespace", "NAMESPACE", "str",
        "the namespace of the NodeFeature object (default default; the chart passes the pod's own)",
        programs=("gfd",),
    )  # fmt: skip
    """GFD: the namespace the NodeFeature object is written to."""
    pod_name: str = option(
        "", "--pod-name", "POD_NAME", "str",
        "this pod's name: the NodeFeature object is owned by it and its DaemonSet, so deleting the DaemonSet "
        "deletes the object (default: no owners)",
        programs=("gfd",),
    )  # fmt: skip
    """GFD: the pod whose DaemonSet and self own the NodeFeature object; empty: no owner references."""
    kube_api_qps: str = option(
        "5", "--kube-api-qps", "KUBE_API_QPS", "str", "QPS to use while talking to the API server (default 5)",
        programs=("gfd",), metavar="QPS",
    )  # fmt: skip
    """GFD: client-side request rate limit (a number > 0)."""
    kube_api_burst: str = option(
        "10", "--kube-api-burst", "KUBE_API_BURST", "str",
        "burst to use while talking to the API server (default 10)", programs=("gfd",), metavar="BURST",
    )  # fmt: skip
    """GFD: client-side request burst (an integer > 0)."""
    mps_container_root: str = option(
        MPS_CONTAINER_ROOT, "--mps-container-root", "KUBEGPU_MPS_CONTAINER_ROOT", "path",
        "kubegpu: where the MPS root is mounted in the plugin, the MPS daemon and client containers "
        f"(default {MPS_CONTAINER_ROOT}, fixed in NVIDIA's plugin; only tests change it)",
        programs=("plugin", "mps"),
    )  # fmt: skip
    """kubegpu: the container path of the MPS root (NVIDIA: always ``/mps``); pipes, logs, ``.ready`` live under it."""
    mps_check_interval: str = option(
        "5s", "--mps-check-interval", "KUBEGPU_MPS_CHECK_INTERVAL", "seconds",
        "kubegpu: while serving MPS resources, check the MPS daemon this often (readiness files and control pipe); "
        "seconds or a Go duration (default 5s, NVIDIA's MPS readiness poll)",
    )  # fmt: skip
    """kubegpu: how often a serving plugin checks its MPS daemon (Unhealthy while it is down)."""

    @property
    def retry_interval_s(self) -> float:
        return durations.duration_seconds(durations.normalise_seconds(self.registration_retry_interval))

    @property
    def mps_check_interval_s(self) -> float:
        return durations.duration_seconds(durations.normalise_seconds(self.mps_check_interval))


def declared(cls: type[Any], key: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...] | None, Cli]]:
    """(field name, file key path or None, its flag) of every flag of ``cls``, nested groups in place."""
    for f in dataclasses.fields(cls):
        cli = cli_of(f)
        doc_key = document_key(f)
        if cli is None:
            nested = _NESTED.get(f.name)
            if nested is not None and doc_key is not None:
                yield from declared(nested, (*key, doc_key))
            continue
        yield f.name, ((*key, doc_key) if doc_key is not None else None), cli


#: Nested flag groups by field name (field types are strings under ``from __future__ import annotations``).
_NESTED: dict[str, type[Any]] = {"plugin": PluginFlags, "gfd": GfdFlags}


def finish(flags: Flags) -> Flags:
    """NVIDIA's post-processing of resolved flags: an unset (or empty) dev root is the driver root."""
    if not flags.nvidia_dev_root:
        return dataclasses.replace(flags, nvidia_dev_root=flags.nvidia_driver_root)
    return flags
