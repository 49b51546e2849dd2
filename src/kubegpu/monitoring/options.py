"""dcgm-exporter's command line, flag for flag: names, short forms, environment variables and defaults.

Owns the table of every flag of dcgm-exporter's CLI (``pkg/cmd/app.go``), what ``kubegpu exporter``
does with each (``serves``: honoured; ``ignored``: accepted, and logged once when set, because it
only means something to a DCGM host engine, a container runtime or a file dump we do not have), and
resolving one flag's value: command line > environment > default, with urfave/cli's value syntax
(booleans by Go's ``strconv.ParseBool``, :mod:`kubegpu.common.boolean`; comma-separated lists).
Pure: no I/O besides reading the environment mapping it is given; must not know what a value does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kubegpu.common import boolean, durations
from kubegpu.monitoring.errors import MonitoringError

Kind = Literal["string", "bool", "int", "list"]
Effect = Literal["serves", "ignored"]


class OptionError(MonitoringError, ValueError):
    """A flag or environment value that cannot be used; the message names it."""


@dataclass(frozen=True)
class Flag:
    """One dcgm-exporter flag.

    Parameters:
        name: the long name (``--name``).
        aliases: other names (``-f``; ``--rbmn``), each usable with one or two dashes, as urfave/cli allows.
        env: the environment variables read when the flag is not given, first set wins.
        default: dcgm-exporter's default, as text.
        kind: how the value is parsed.
        effect: ``serves`` (honoured here) or ``ignored`` (accepted, logged once when set).
        meaning: what dcgm-exporter does with it, and what we do (README's table is checked against it).
    """

    name: str
    aliases: tuple[str, ...]
    env: tuple[str, ...]
    default: str
    kind: Kind
    effect: Effect
    meaning: str

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def _f(name: str, aliases: str, env: str, default: str, kind: Kind, effect: Effect, meaning: str) -> Flag:
    return Flag(name, tuple(aliases.split()), tuple(env.split()), default, kind, effect, meaning)


# dcgm-exporter's defaults: counters file inside its image, web timeouts from internal/pkg/appconfig.
DEFAULT_COLLECTORS = "/etc/dcgm-exporter/default-counters.csv"
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"

FLAGS: tuple[Flag, ...] = (
    _f("collectors", "f", "DCGM_EXPORTER_COLLECTORS", DEFAULT_COLLECTORS, "string", "serves",
       "counters file; when the default path does not exist the copy shipped with kubegpu is used"),
    _f("config-file", "", "DCGM_EXPORTER_CONFIG_FILE", "", "string", "ignored",
       "dcgm-exporter's YAML settings file: not read; give its settings as flags or env"),
    _f("address", "a", "DCGM_EXPORTER_LISTEN", ":9400", "string", "serves", "listen address HOST:PORT, [V6]:PORT"),
    _f("web-read-timeout", "", "DCGM_EXPORTER_WEB_READ_TIMEOUT", "10s", "string", "serves",
       "longest wait for a request head (Go duration); a malformed value falls back to the default, as upstream"),
    _f("web-write-timeout", "", "DCGM_EXPORTER_WEB_WRITE_TIMEOUT", "30s", "string", "serves",
       "longest wait for a response to be written (Go duration)"),
    _f("collect-interval", "c", "DCGM_EXPORTER_INTERVAL", "30000", "int", "serves", "collection interval in ms"),
    _f("kubernetes", "k", "DCGM_EXPORTER_KUBERNETES", "false", "bool", "serves",
       "pod, namespace, container labels from the kubelet's pod-resources API"),
    _f("use-old-namespace", "o", "DCGM_EXPORTER_USE_OLD_NAMESPACE", "false", "bool", "serves",
       "1.x label names: uuid, pod_name, pod_namespace, container_name"),
    _f("cpu-devices", "p", "DCGM_EXPORTER_CPU_DEVICES_STR", "f", "string", "ignored",
       "CPU entities (Grace): none here; the syntax is checked"),
    _f("configmap-data", "m", "DCGM_EXPORTER_CONFIGMAP_DATA", "none", "string", "serves",
       "counters CSV from the 'metrics' key of ConfigMap NAMESPACE:NAME, read at start and on SIGHUP; when it "
       "cannot be read, logged and the -f file is used"),
    _f("remote-hostengine-info", "r", "DCGM_REMOTE_HOSTENGINE_INFO", "localhost:5555", "string", "ignored",
       "remote nv-hostengine: there is none, telemetry comes from NVML"),
    _f("kubernetes-enable-pod-labels", "", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "false", "bool",
       "serves", "with -k: the pod's labels as series labels, names sanitised (app.kubernetes.io/name -> "
       "app_kubernetes_io_name), from a watch of this node's pods ($NODE_NAME)"),
    _f("kubernetes-enable-pod-uid", "", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", "false", "bool", "serves",
       "with -k: a pod_uid label, from the same watch"),
    _f("kubernetes-gpu-id-type", "", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "uid", "string", "serves",
       "uid: device IDs are GPU/MIG UUIDs (or NVML indices); device-name: nvidiaN[/vgpuK] IDs, by minor number"),
    _f("kubernetes-pod-label-allowlist-regex", "", "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", "", "list",
       "serves", "keep only the pod labels whose key one of these regexes matches (unanchored); none: all"),
    _f("devices", "d", "DCGM_EXPORTER_DEVICES_STR", "f", "string", "serves",
       "which GPUs / GPU instances get series: f, g[:ids], i[:ids], g[:ids]+i[:ids]"),
    _f("no-hostname", "n", "DCGM_EXPORTER_NO_HOSTNAME", "false", "bool", "serves", "leave out the hostname label"),
    _f("switch-devices", "s", "DCGM_EXPORTER_OTHER_DEVICES_STR", "f", "string", "ignored",
       "NVSwitch entities: none here; the syntax is checked"),
    _f("fake-gpus", "", "DCGM_EXPORTER_USE_FAKE_GPUS", "false", "bool", "ignored",
       "DCGM fake GPUs: use --machine PROFILE for simulated GPUs"),
    _f("web-config-file", "", "DCGM_EXPORTER_WEB_CONFIG_FILE", "", "string", "serves",
       "Prometheus exporter-toolkit web config: TLS, client certificates, basic auth, headers"),
    _f("xid-count-window-size", "x", "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "300000", "int", "ignored",
       "window of DCGM_EXP_XID_ERRORS_COUNT, a field not served here"),
    _f("replace-blanks-in-model-name", "rbmn", "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME", "false", "bool",
       "serves", "dashes instead of spaces in modelName"),
    _f("debug", "", "DCGM_EXPORTER_DEBUG", "false", "bool", "serves", "debug log level"),
    _f("clock-events-count-window-size", "", "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE", "300000", "int",
       "ignored", "window of DCGM_EXP_CLOCK_EVENTS_COUNT, a field not served here"),
    _f("enable-dcgm-log", "", "DCGM_EXPORTER_ENABLE_DCGM_LOG", "false", "bool", "ignored", "DCGM's own log: no DCGM"),
    _f("dcgm-log-level", "", "DCGM_EXPORTER_DCGM_LOG_LEVEL", "NONE", "string", "ignored",
       "DCGM's log level (NONE FATAL ERROR WARN INFO DEBUG VERB, checked): no DCGM"),
    _f("log-format", "", "DCGM_EXPORTER_LOG_FORMAT", "text", "string", "serves", "text (key=value) or json"),
    _f("pod-resources-kubelet-socket", "", "DCGM_POD_RESOURCES_KUBELET_SOCKET", POD_RESOURCES_SOCKET, "string",
       "serves", "the kubelet's pod-resources socket"),
    _f("hpc-job-mapping-dir", "", "DCGM_HPC_JOB_MAPPING_DIR", "", "string", "ignored",
       "HPC (Slurm) job files: not read"),
    _f("container-labels", "", "DCGM_EXPORTER_CONTAINER_LABELS", "false", "bool", "ignored",
       "container runtime labels: not read"),
    _f("container-runtime-socket", "", "DCGM_CONTAINER_RUNTIME_SOCKET", "", "string", "ignored",
       "container runtime socket: not used"),
    _f("nvidia-resource-names", "", "NVIDIA_RESOURCE_NAMES", "", "list", "serves",
       "extra resource names to attribute"),
    _f("kubernetes-virtual-gpus", "", "KUBERNETES_VIRTUAL_GPUS", "false", "bool", "ignored",
       "shared GPUs: here a GPU held by several containers always has one series per container"),
    _f("dump-enabled", "", "DCGM_EXPORTER_DUMP_ENABLED", "false", "bool", "ignored", "debug dumps: not written"),
    _f("dump-directory", "", "DCGM_EXPORTER_DUMP_DIRECTORY", "/tmp/dcgm-exporter-debug", "string", "ignored",
       "debug dumps: not written"),
    _f("dump-retention", "", "DCGM_EXPORTER_DUMP_RETENTION", "24", "int", "ignored", "debug dumps: not written"),
    _f("dump-compression", "", "DCGM_EXPORTER_DUMP_COMPRESSION", "true", "bool", "ignored",
       "debug dumps: not written"),
    _f("kubernetes-enable-dra", "", "KUBERNETES_ENABLE_DRA", "false", "bool", "ignored",
       "DRA-managed GPUs: not attributed"),
    _f("disable-startup-validate", "", "DISABLE_STARTUP_VALIDATE", "false", "bool", "ignored",
       "DCGM prerequisite checks: none to skip"),
    _f("enable-gpu-bind-unbind-watch", "", "DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH", "false", "bool", "ignored",
       "DCGM bind/unbind events: no DCGM"),
    _f("gpu-bind-unbind-poll-interval", "", "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL", "1s", "string", "ignored",
       "DCGM bind/unbind events: no DCGM"),
    _f("enable-pprof", "", "DCGM_EXPORTER_ENABLE_PPROF", "false", "bool", "ignored", "Go profiling: not served"),
    _f("web-systemd-socket", "", "DCGM_EXPORTER_SYSTEMD_SOCKET", "false", "bool", "serves",
       "serve the socket systemd passed (LISTEN_FDS, descriptor 3) instead of binding --address"),
)  # fmt: skip

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}


def go_duration_s(text: str) -> float:
    """A Go duration (``10s``, ``1m30s``, ``250ms``) in seconds; ValueError with Go's text."""
    return durations.parse_duration_ns(text) / 1e9


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


def parse_list(values: Sequence[str]) -> tuple[str, ...]:
    """urfave/cli's string slice: every occurrence, each split on commas, blanks dropped."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class Value:
    """A resolved flag value and where it came from (``--name``, ``$VAR`` or ``default``)."""

    value: str | bool | int | tuple[str, ...]
    source: str

    @property
    def is_set(self) -> bool:
        return self.source != "default"


def resolve(flag: Flag, given: Sequence[str] | None, environ: Mapping[str, str]) -> Value:
    """The value of ``flag``: ``given`` (the command line's raw values, None if absent), else env, else default.

    Raises :class:`OptionError` naming the flag or variable and the value.
    """
    if given:
        raw, source = list(given), f"--{flag.name}"
    else:
        for name in flag.env:
            if name in environ:
                raw, source = [environ[name]], f"${name}"
                break
        else:
            raw, source = [flag.default], "default"
    try:
        if flag.kind == "list":
            return Value(parse_list(raw), source)
        text = raw[-1]  # a repeated flag: the last one wins, as with Go's flag package
        if flag.kind == "bool":
            return Value(boolean.parse_bool(text.strip()), source)
        if flag.kind == "int":
            return Value(parse_int(text), source)
        return Value(text, source)
    except ValueError as exc:
        raise OptionError(f"{source}: {exc}") from None


def normalise_argv(argv: Sequence[str], long_names: set[str]) -> list[str]:
    """Rewrite Go-style single-dash long flags (``-collectors x``, ``-rbmn``) to ``--`` for argparse.

    urfave/cli accepts one or two dashes for every name; argparse would read ``-address`` as ``-a ddress``.
    Only names in ``long_names`` are rewritten, and nothing after a ``--`` separator.
    """
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[i:])
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
            name = arg[1:].partition("=")[0]
            if name in long_names:
                arg = "-" + arg
        out.append(arg)
    return out


@dataclass(frozen=True)
class DeviceSpec:
    """A ``-d``/``-p``/``-s`` device selection: ``f`` (flex), or major (``g``) and/or minor (``i``) entities.

    ``major``/``minor``: None = not selected, ``()`` = all, else the IDs listed.
    """

    flex: bool
    major: tuple[int, ...] | None = None
    minor: tuple[int, ...] | None = None


FLEX = DeviceSpec(flex=True)


def _ids(text: str, whole: str) -> tuple[int, ...]:
    out: list[int] = []
    for item in text.split(","):
        low, dash, high = item.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"{whole!r}: {item.strip()!r} is not an ID or an ID range like 2-4") from None
        if first < 0 or last < first:
            raise ValueError(f"{whole!r}: {item.strip()!r} is not an ID or an ID range like 2-4")
        out.extend(range(first, last + 1))
    return tuple(out)


def parse_devices(text: str) -> DeviceSpec:
    """dcgm-exporter's device syntax: ``f``, ``g[:ids]``, ``i[:ids]`` or ``g[:ids]+i[:ids]`` (ids: ``0,2-4``)."""
    value = text.strip()
    if value == "f":
        return FLEX
    major: tuple[int, ...] | None = None
    minor: tuple[int, ...] | None = None
    for part in value.split("+"):
        key, colon, ids = part.partition(":")
        if key == "f":
            raise ValueError(f"{text!r}: f (flex) cannot be combined with g or i")
        if key not in ("g", "i") or (colon and not ids):
            raise ValueError(f"{text!r}: expected f, g[:ids], i[:ids] or g[:ids]+i[:ids]")
        chosen = _ids(ids, text) if colon else ()
        if key == "g":
            if major is not None:
                raise ValueError(f"{text!r}: g given twice")
            major = chosen
        else:
            if minor is not None:
                raise ValueError(f"{text!r}: i given twice")
            minor = chosen
    return DeviceSpec(flex=False, major=major, minor=minor)
