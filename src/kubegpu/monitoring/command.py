"""``kubegpu exporter``: dcgm-exporter compatible Prometheus metrics, with pod labels.

Owns the command line (every flag and environment variable of dcgm-exporter, from the table in
:mod:`kubegpu.monitoring.options`, plus our own; CLI > env > default), wiring the backend, the
collector and the endpoint together, and the process lifetime: SIGTERM/SIGINT stop it cleanly,
SIGHUP reloads the counters file and the web config (a bad file is logged and the running one
kept), and the handlers are in place before anything slow starts. Must not contain field, label or
attribution rules.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from kubegpu.monitoring import options

if TYPE_CHECKING:
    from kubegpu.monitoring.collector import Collector
    from kubegpu.monitoring.counters import CounterSet
    from kubegpu.monitoring.endpoint import Endpoint
    from kubegpu.monitoring.kubernetes import NodePods
    from kubegpu.monitoring.webconfig import WebConfig

log = logging.getLogger(__name__)

PROG = "kubegpu exporter"
# The device plugin's names for the driver location, so one DaemonSet template serves both.
ENV_DRIVER_ROOT = "NVIDIA_DRIVER_ROOT"
ENV_CONTAINER_DRIVER_ROOT = "CONTAINER_DRIVER_ROOT"
#: The node name for the hostname label (set it from the downward API ``spec.nodeName`` in a DaemonSet).
ENV_NODE_NAME = "NODE_NAME"
#: Before dcgm-exporter's name for it existed, ours; still accepted.
OUR_SOCKET_FLAG = "pod-resources-socket"

_DCGM_LOG_LEVELS = ("NONE", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "VERB")
_GPU_ID_TYPES = ("uid", "device-name")


class _Stop(Exception):
    """SIGTERM/SIGINT before the event loop took over the signals."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _flag_names(flag: options.Flag) -> list[str]:
    return [f"--{flag.name}", *(f"-{a}" if len(a) == 1 else f"--{a}" for a in flag.aliases)]


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Serve dcgm-exporter compatible GPU metrics on /metrics (and /health), optionally labelled "
        "with the pod, namespace and container holding each GPU (kubelet pod-resources API). Takes every "
        "dcgm-exporter flag and environment variable; those that need a DCGM host engine are accepted and "
        "logged once as having no effect.",
    )
    dcgm = parser.add_argument_group("dcgm-exporter's flags (value: --flag, else $ENV, else default)")
    for flag in options.FLAGS:
        names = _flag_names(flag)
        if flag.name == "address":
            names.append("--listen")
        if flag.name == "pod-resources-kubelet-socket":
            names.append(f"--{OUR_SOCKET_FLAG}")
        env = ", ".join(f"${e}" for e in flag.env)
        help_text = f"{flag.meaning} ({env}; default {flag.default or 'none'})"
        if flag.effect == "ignored":
            help_text += " [accepted, no effect here]"
        if flag.kind == "bool":
            dcgm.add_argument(
                *names, dest=flag.dest, action="append", nargs="?", const="true", metavar="BOOL", help=help_text
            )
        else:
            dcgm.add_argument(*names, dest=flag.dest, action="append", metavar=flag.kind.upper(), help=help_text)
    ours = parser.add_argument_group("kubegpu's own flags")
    ours.add_argument(
        "--hostname-label",
        choices=("Hostname", "hostname"),
        default="Hostname",
        help="spelling of the hostname label: Hostname (released dcgm-exporter 4.x, default) or hostname "
        f"(dcgm-exporter main); its value is ${ENV_NODE_NAME} or the host name",
    )
    ours.add_argument("--machine", metavar="PROFILE", help="read a simulated machine instead of NVML")
    ours.add_argument(
        "--fault-file",
        type=Path,
        metavar="PATH",
        help="the simulated machine's fault journal (default: $KUBEGPU_FAULT_FILE or the one 'kubegpu fault' "
        "uses); pass the path given to 'kubegpu fault'",
    )
    ours.add_argument(
        "--driver-root",
        metavar="PATH",
        help=f"host path of the NVIDIA driver installation, where libnvidia-ml.so.1 is looked for (default: "
        f"${ENV_DRIVER_ROOT} or /)",
    )
    ours.add_argument(
        "--container-driver-root",
        metavar="PATH",
        help=f"where the driver root is mounted in the exporter's container, searched first (default: "
        f"${ENV_CONTAINER_DRIVER_ROOT} or /driver-root)",
    )
    ours.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="the cluster for --kubernetes-enable-pod-labels/-uid and --configmap-data (default: $KUBECONFIG, "
        "else the in-cluster service account, else ~/.kube/config)",
    )
    ours.add_argument("--print-default-counters", action="store_true", help="print the shipped counters file")
    ours.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    return parser


@dataclass(frozen=True)
class Settings:
    """Everything the exporter runs with, resolved and checked."""

    values: Mapping[str, options.Value]
    counters_path: Path | None  # None: the shipped file
    web_config_path: Path | None
    interval_s: float
    read_timeout_s: float
    write_timeout_s: float
    kubernetes: bool
    socket_path: str
    devices: options.DeviceSpec
    configmap: tuple[str, str] | None = None  # -m NAMESPACE:NAME
    pod_labels: bool = False
    pod_uid: bool = False
    allowlist: tuple[re.Pattern[str], ...] = ()

    def __getitem__(self, name: str) -> options.Value:
        return self.values[name]


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Resolve and check every dcgm-exporter flag; exits 2 (one line) naming a bad one."""
    values: dict[str, options.Value] = {}
    for flag in options.FLAGS:
        try:
            values[flag.name] = options.resolve(flag, getattr(args, flag.dest), environ)
        except options.OptionError as exc:
            fail(str(exc))

    def text(name: str) -> str:
        return str(values[name].value)

    interval = values["collect-interval"]
    if not isinstance(interval.value, int) or interval.value <= 0:
        fail(f"{interval.source} {interval.value}: must be a positive number of milliseconds")
    timeouts: list[float] = []
    for name in ("web-read-timeout", "web-write-timeout"):
        try:
            timeouts.append(options.go_duration_s(text(name)))
        except ValueError as exc:
            # dcgm-exporter falls back to its default on a malformed duration; so do we, loudly.
            log.warning("bad duration, using the default", extra={"flag": name, "error": str(exc)})
            timeouts.append(options.go_duration_s(options.BY_NAME[name].default))
    for name in ("devices", "cpu-devices", "switch-devices"):
        try:
            spec = options.parse_devices(text(name))
        except ValueError as exc:
            fail(f"{values[name].source}: {exc}")
        if name == "devices":
            devices = spec
    for name, choices in (("kubernetes-gpu-id-type", _GPU_ID_TYPES), ("dcgm-log-level", _DCGM_LOG_LEVELS)):
        if text(name) not in choices:
            fail(f"{values[name].source}: {text(name)!r}: choose from {', '.join(choices)}")
    if text("log-format") not in ("text", "json"):
        fail(f"invalid log-format parameter values: {text('log-format')}")
    allow = values["kubernetes-pod-label-allowlist-regex"].value
    allowlist: list[re.Pattern[str]] = []
    for pattern in allow if isinstance(allow, tuple) else ():
        try:
            allowlist.append(re.compile(pattern))
        except re.error as exc:
            fail(f"{values['kubernetes-pod-label-allowlist-regex'].source}: regex {pattern!r}: {exc}")
    configmap = parse_configmap_data(values["configmap-data"])

    collectors = values["collectors"]
    counters_path: Path | None = Path(text("collectors"))
    if not collectors.is_set and counters_path is not None and not counters_path.exists():
        counters_path = None  # dcgm-exporter's image has this file; ours ships a copy in the package
    socket_value = values["pod-resources-kubelet-socket"]
    kubernetes = bool(values["kubernetes"].value) or socket_value.is_set
    web = text("web-config-file")
    return Settings(
        values=values,
        counters_path=counters_path,
        web_config_path=Path(web) if web else None,
        interval_s=int(interval.value) / 1000.0,
        read_timeout_s=timeouts[0],
        write_timeout_s=timeouts[1],
        kubernetes=kubernetes,
        socket_path=text("pod-resources-kubelet-socket"),
        devices=devices,
        configmap=configmap,
        pod_labels=kubernetes and bool(values["kubernetes-enable-pod-labels"].value),
        pod_uid=kubernetes and bool(values["kubernetes-enable-pod-uid"].value),
        allowlist=tuple(allowlist),
    )


#: ``-m``'s "not set" value (dcgm-exporter's).
NO_CONFIGMAP = "none"


def parse_configmap_data(value: options.Value) -> tuple[str, str] | None:
    """``-m NAMESPACE:NAME`` as (namespace, name); ``none`` = not set; anything else exits 2."""
    text = str(value.value).strip()
    if text == NO_CONFIGMAP:
        return None
    namespace, colon, name = text.partition(":")
    if not colon or not namespace or not name or ":" in name:
        fail(f"{value.source} {text!r}: expected NAMESPACE:NAME (or none)")
    return namespace, name


#: A counters file is a few KiB; anything past this is not one (``/dev/zero``, a log file given by mistake).
MAX_COUNTERS_BYTES = 1 << 20


def read_counters(path: Path | None) -> CounterSet:
    """The counters file (None: the shipped one); raises CountersError naming the file."""
    from kubegpu.monitoring import counters

    if path is None:
        return counters.parse(counters.default_text(), counters.DEFAULT_FILE_NAME)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_COUNTERS_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        why = exc.strerror if isinstance(exc, OSError) else None
        raise counters.CountersError(f"counters file {path}: cannot read: {why or exc}") from None
    if len(raw) > MAX_COUNTERS_BYTES:
        raise counters.CountersError(f"counters file {path}: larger than {MAX_COUNTERS_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise counters.CountersError(f"counters file {path}: not UTF-8 text") from None
    counter_set = counters.parse(text, str(path))
    if not counter_set.values:
        raise counters.CountersError(f"counters file {path}: enables no field this exporter can serve")
    return counter_set


def api_config(path: str | None, purpose: str) -> bool:
    """Whether a cluster configuration loads; an explicit ``--kubeconfig`` that does not exits 2, a missing
    environment one is logged once (``purpose`` then goes without, as dcgm-exporter outside a cluster)."""
    from kubegpu.monitoring import kubernetes

    try:
        kubernetes.check_config(path)
    except kubernetes.KubeconfigError as exc:
        if path:
            fail(str(exc))
        log.warning("no Kubernetes API configuration", extra={"for": purpose, "error": str(exc)})
        return False
    return True


def _configmap_counter_set(text: str, where: str) -> CounterSet | None:
    from kubegpu.monitoring import counters

    try:
        counter_set = counters.parse(text, where)
    except counters.CountersError as exc:
        log.error("counters ConfigMap rejected", extra={"error": str(exc)})
        return None
    if not counter_set.values:
        log.error("counters ConfigMap rejected", extra={"error": f"{where}: enables no field this exporter can serve"})
        return None
    return counter_set


async def configmap_counters(settings: Settings, kubeconfig: str | None) -> CounterSet | None:
    """The counters of the ``-m`` ConfigMap, or None (logged: unreadable, no ``metrics`` key, malformed)."""
    from kubegpu.monitoring import kubernetes

    if settings.configmap is None:
        return None
    namespace, name = settings.configmap
    try:
        client = kubernetes.connect(kubeconfig)
    except kubernetes.KubeconfigError as exc:
        log.error("counters ConfigMap unavailable", extra={"error": str(exc)})
        return None
    try:
        text = await kubernetes.read_configmap(client, namespace, name)
    except kubernetes.ConfigMapUnavailable as exc:
        log.error("counters ConfigMap unavailable", extra={"error": str(exc)})
        return None
    finally:
        await client.close()
    return _configmap_counter_set(text, f"ConfigMap {namespace}:{name}")


def configmap_counters_at_start(settings: Settings, kubeconfig: str | None) -> CounterSet | None:
    """At start: the ``-m`` ConfigMap's counters; None means the ``-f`` file is used, as dcgm-exporter falls
    back to it (logged with the file). An explicit ``--kubeconfig`` that does not load exits 2."""
    if settings.configmap is None:
        return None
    if api_config(kubeconfig, "--configmap-data"):
        counter_set = asyncio.run(configmap_counters(settings, kubeconfig))
        if counter_set is not None:
            namespace, name = settings.configmap
            log.info("counters from ConfigMap", extra={"configmap": f"{namespace}:{name}"})
            return counter_set
    log.warning("falling back to the counters file", extra={"file": str(settings.counters_path or "default")})
    return None


def _log_ignored(settings: Settings) -> None:
    """Once at start: every flag set to a non-default value that has no effect here."""
    if not settings.kubernetes:
        for name in ("kubernetes-enable-pod-labels", "kubernetes-enable-pod-uid"):
            if settings[name].value:
                log.warning(
                    "flag has no effect without --kubernetes",
                    extra={"flag": f"--{name}", "from": settings[name].source},
                )
    for flag in options.FLAGS:
        value = settings[flag.name]
        if flag.effect == "ignored" and value.is_set and value.value != options.resolve(flag, None, {}).value:
            log.warning(
                "flag has no effect here",
                extra={"flag": f"--{flag.name}", "from": value.source, "why": flag.meaning},
            )


#: systemd passes activated sockets from this descriptor on (sd_listen_fds(3)).
SD_LISTEN_FDS_START = 3


def systemd_socket(environ: Mapping[str, str], pid: int) -> socket.socket:
    """The first socket systemd passed (``LISTEN_FDS``/``LISTEN_PID``); exits 2 when there is none for us."""
    try:
        count = int(environ.get("LISTEN_FDS", "0"))
        owner = int(environ.get("LISTEN_PID", str(pid)))
    except ValueError:
        fail("--web-systemd-socket: LISTEN_FDS/LISTEN_PID are not numbers")
    if count < 1 or owner != pid:
        fail("--web-systemd-socket: no socket passed by systemd (LISTEN_FDS unset or for another process)")
    try:
        sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    except OSError as exc:
        fail(f"--web-systemd-socket: descriptor {SD_LISTEN_FDS_START} is not a socket: {exc.strerror or exc}")
    if sock.type != socket.SOCK_STREAM:
        fail(f"--web-systemd-socket: descriptor {SD_LISTEN_FDS_START} is not a stream socket")
    sock.setblocking(False)
    return sock


def _check_devices(spec: options.DeviceSpec, gpu_indices: set[int], gi_ids: set[int], has_mig: bool) -> None:
    if spec.flex:
        return
    missing_gpus = sorted(set(spec.major or ()) - gpu_indices)
    if missing_gpus:
        fail(f"--devices: GPU {missing_gpus[0]} does not exist on this machine (GPUs: {sorted(gpu_indices)})")
    if spec.minor is not None and not has_mig:
        fail("--devices: i (GPU instances) cannot be specified unless MIG mode is enabled")
    missing_gi = sorted(set(spec.minor or ()) - gi_ids)
    if missing_gi:
        fail(f"--devices: GPU instance {missing_gi[0]} does not exist on this machine (GPU_I_IDs: {sorted(gi_ids)})")


def main(argv: Sequence[str]) -> int:
    # Signals first: a SIGTERM while NVML starts must stop us cleanly, a SIGHUP must not kill us (exit 129).
    def early_stop(_sig: int, _frame: FrameType | None) -> None:
        raise _Stop

    def early_hangup(_sig: int, _frame: FrameType | None) -> None:
        log.info("SIGHUP before serving: the files being loaded now are the ones read")

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, early_stop),
        signal.SIGINT: signal.signal(signal.SIGINT, early_stop),
        signal.SIGHUP: signal.signal(signal.SIGHUP, early_hangup),
    }
    try:
        return _main(argv)
    except _Stop:
        log.info("exporter stopped before serving")
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(argv: Sequence[str]) -> int:
    from kubegpu.gpu import backends, errors
    from kubegpu.monitoring import counters, endpoint, render, webconfig

    parser = _parser()
    long_names = {f.name for f in options.FLAGS} | {a for f in options.FLAGS for a in f.aliases if len(a) > 1}
    long_names |= {"listen", OUR_SOCKET_FLAG, "version"}
    args = parser.parse_args(options.normalise_argv(argv, long_names))
    if args.version:
        from kubegpu import __version__

        print(f"{PROG} {__version__}")
        return 0
    if args.print_default_counters:
        sys.stdout.write(counters.default_text())
        return 0
    settings = resolve(args, os.environ)
    if settings["debug"].value:
        logging.getLogger().setLevel(logging.DEBUG)
    try:
        address = endpoint.parse_address(str(settings["address"].value))
    except ValueError as exc:
        fail(str(exc))
    counter_set = configmap_counters_at_start(settings, args.kubeconfig)
    if counter_set is None:
        try:
            counter_set = read_counters(settings.counters_path)
        except counters.CountersError as exc:
            fail(str(exc))
    pod_meta_api = (settings.pod_labels or settings.pod_uid) and api_config(args.kubeconfig, "pod labels and UIDs")
    web: WebConfig | None = None
    if settings.web_config_path is not None:
        try:
            web = webconfig.load(settings.web_config_path)
        except webconfig.WebConfigError as exc:
            fail(f"--web-config-file {exc}")
    _log_ignored(settings)

    try:
        backend = backends.open_backend(
            args.machine,
            fault_file=args.fault_file,
            driver_root=args.driver_root or os.environ.get(ENV_DRIVER_ROOT) or "/",
            container_driver_root=args.container_driver_root
            or os.environ.get(ENV_CONTAINER_DRIVER_ROOT)
            or "/driver-root",
        )
    except errors.ProfileError as exc:
        fail(str(exc))
    try:
        machine = backend.discover()
    except errors.GpuError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    _check_devices(
        settings.devices,
        {g.index for g in machine.gpus},
        {m.gi_id for g in machine.gpus if g.mig_enabled for m in g.mig_devices},
        any(g.mig_enabled for g in machine.gpus),
    )
    _warn_unsupported(counter_set, settings.counters_path)

    label_options = render.LabelOptions(
        hostname_label=None if settings["no-hostname"].value else args.hostname_label,
        hostname=os.environ.get(ENV_NODE_NAME) or socket.gethostname(),
        replace_blanks_in_model_name=bool(settings["replace-blanks-in-model-name"].value),
        old_namespace=bool(settings["use-old-namespace"].value),
        devices=settings.devices,
    )
    from kubegpu.monitoring.collector import Collector as CollectorImpl

    pods = None
    if settings.kubernetes:
        from kubegpu.monitoring.podresources import PodResourcesClient

        _check_socket_dir(settings)
        pods = PodResourcesClient(settings.socket_path)
    extra = settings["nvidia-resource-names"].value
    node_pods: NodePods | None = None
    if pods is not None and pod_meta_api:
        from kubegpu.monitoring import kubernetes

        node_name = os.environ.get(ENV_NODE_NAME) or socket.gethostname()
        node_pods = kubernetes.NodePods(node_name, kubernetes.connect(args.kubeconfig), settings.allowlist)
    collector = CollectorImpl(
        backend,
        machine,
        counter_set,
        label_options,
        pods=pods,
        extra_resources=extra if isinstance(extra, tuple) else (),
        device_names=settings["kubernetes-gpu-id-type"].value == "device-name",
        pod_meta=node_pods,
        pod_uid=settings.pod_uid,
        pod_labels=settings.pod_labels,
    )
    listening = systemd_socket(os.environ, os.getpid()) if settings["web-systemd-socket"].value else None
    server = endpoint.Endpoint(
        collector,
        address,
        web=web,
        read_timeout_s=settings.read_timeout_s,
        write_timeout_s=settings.write_timeout_s,
        sock=listening,
    )
    try:
        return asyncio.run(_serve(collector, server, settings, backend.name, node_pods, args.kubeconfig))
    except OSError as exc:
        print(f"{PROG}: cannot listen on {address}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _check_socket_dir(settings: Settings) -> None:
    """A pod-resources socket whose directory does not exist is a wrong path or a missing mount: exit 2 now,
    rather than a collection-long wait for a socket that cannot appear. (A missing socket in an existing
    directory is the kubelet restarting: logged, and tried again at each collection.)"""
    value = settings["pod-resources-kubelet-socket"]
    directory = Path(settings.socket_path).parent
    if not directory.is_dir():
        fail(
            f"{value.source} {settings.socket_path}: directory {directory} does not exist "
            "(is the kubelet's pod-resources directory mounted?)"
        )


def _warn_unsupported(counter_set: CounterSet, path: Path | None) -> None:
    for row in counter_set.unsupported:
        log.warning(
            "counter not available, skipped",
            extra={"field": row.name, "type": row.type, "line": row.line, "file": str(path or "default")},
        )


def reload(
    collector: Collector, server: Endpoint, settings: Settings, from_configmap: CounterSet | None = None
) -> None:
    """SIGHUP: read the counters file and the web config again; a bad one is logged and the running one kept.

    ``from_configmap``: the counters the ConfigMap of ``-m`` holds now, read by the caller; the file is read
    only without them, as at start.
    """
    from kubegpu.monitoring import counters, webconfig

    try:
        counter_set = from_configmap or read_counters(settings.counters_path)
    except counters.CountersError as exc:
        log.error("reload: counters file rejected, keeping the running one", extra={"error": str(exc)})
    else:
        collector.use_counters(counter_set)
        _warn_unsupported(counter_set, settings.counters_path)
        where = str(settings.counters_path or "default")
        if from_configmap is not None and settings.configmap is not None:
            where = "ConfigMap {}:{}".format(*settings.configmap)
        log.info("reload: counters file applied", extra={"file": where, "fields": len(counter_set.values)})
    if settings.web_config_path is not None:
        try:
            server.reconfigure(webconfig.load(settings.web_config_path))
        except webconfig.WebConfigError as exc:
            log.error("reload: web config rejected, keeping the running one", extra={"error": str(exc)})
        else:
            log.info("reload: web config applied", extra={"file": str(settings.web_config_path)})


async def _serve(
    collector: Collector,
    server: Endpoint,
    settings: Settings,
    backend_name: str,
    node_pods: NodePods | None = None,
    kubeconfig: str | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def reload_and_collect() -> None:
        fresh = await configmap_counters(settings, kubeconfig) if settings.configmap is not None else None
        reload(collector, server, settings, fresh)
        await collector.collect_once()

    reloads: set[asyncio.Task[None]] = set()

    def hangup() -> None:
        log.info("SIGHUP: reloading")
        task = loop.create_task(reload_and_collect())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, hangup)
    if node_pods is not None:
        node_pods.start()
        log.info("watching the node's pods for pod labels", extra={"node": node_pods.node_name})
    await collector.collect_once()  # the first scrape already has data
    await server.start()
    log.info(
        "exporter listening",
        extra={
            "address": server.address,
            "backend": backend_name,
            "interval_s": settings.interval_s,
            "tls": server.tls,
        },
    )
    try:
        await collector.run(settings.interval_s, stop)
    finally:
        await server.stop()
        await collector.close()
        if node_pods is not None:
            await node_pods.stop()
        log.info("exporter stopped")
    return 0
