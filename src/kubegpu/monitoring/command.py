"""``kubegpu exporter``: dcgm-exporter compatible Prometheus metrics, with pod labels.

Owns the command line (dcgm-exporter's flag names and environment variables
where they exist, CLI > env > default), wiring the backend, the collector and
the endpoint together, and the process lifetime (SIGTERM/SIGINT stop it
cleanly). Must not contain field, label or attribution rules.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubegpu.api import constants
from kubegpu.common import boolean

if TYPE_CHECKING:
    from kubegpu.monitoring.collector import Collector
    from kubegpu.monitoring.endpoint import Endpoint

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = ":9400"
DEFAULT_INTERVAL_MS = 30000

# dcgm-exporter's environment variables for the same settings.
ENV_ADDRESS = "DCGM_EXPORTER_LISTEN"
ENV_INTERVAL = "DCGM_EXPORTER_INTERVAL"
ENV_COLLECTORS = "DCGM_EXPORTER_COLLECTORS"
ENV_KUBERNETES = "DCGM_EXPORTER_KUBERNETES"
ENV_SOCKET = "DCGM_POD_RESOURCES_KUBELET_SOCKET"
ENV_RESOURCE_NAMES = "NVIDIA_RESOURCE_NAMES"
# The device plugin's names for the driver location, so one DaemonSet template serves both.
ENV_DRIVER_ROOT = "NVIDIA_DRIVER_ROOT"
ENV_CONTAINER_DRIVER_ROOT = "CONTAINER_DRIVER_ROOT"
#: The node name for the hostname label (set it from the downward API ``spec.nodeName`` in a DaemonSet).
ENV_NODE_NAME = "NODE_NAME"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubegpu exporter",
        description="Serve dcgm-exporter compatible GPU metrics on /metrics (and /health), optionally labelled "
        "with the pod, namespace and container holding each GPU (kubelet pod-resources API).",
    )
    parser.add_argument(
        "-a",
        "--address",
        "--listen",
        dest="address",
        metavar="HOST:PORT",
        help=f"listen address (default: ${ENV_ADDRESS} or {DEFAULT_ADDRESS}, every interface)",
    )
    parser.add_argument(
        "-f",
        "--collectors",
        metavar="CSV",
        help=f"counters file in dcgm-exporter's format (default: ${ENV_COLLECTORS} or the file shipped with "
        "kubegpu; print it with --print-default-counters)",
    )
    parser.add_argument(
        "-c",
        "--collect-interval",
        metavar="MS",
        help=f"collection interval in milliseconds (default: ${ENV_INTERVAL} or {DEFAULT_INTERVAL_MS}); "
        "scrapes are served from the last collection",
    )
    parser.add_argument(
        "-k",
        "--kubernetes",
        action="store_true",
        default=None,
        help=f"add pod, namespace and container labels from the kubelet's pod-resources API (default: "
        f"${ENV_KUBERNETES}; implied by --pod-resources-socket)",
    )
    parser.add_argument(
        "--pod-resources-socket",
        metavar="PATH",
        help=f"the kubelet's pod-resources socket (default: ${ENV_SOCKET} or {constants.POD_RESOURCES_SOCKET}); "
        "giving it turns on --kubernetes",
    )
    parser.add_argument(
        "--nvidia-resource-names",
        metavar="NAMES",
        help=f"comma-separated extra resource names to attribute, besides nvidia.com/gpu, nvidia.com/mig-* and "
        f"nvidia.com/gpu.shared (default: ${ENV_RESOURCE_NAMES})",
    )
    parser.add_argument("-n", "--no-hostname", action="store_true", help="leave out the hostname label")
    parser.add_argument(
        "--hostname-label",
        choices=("Hostname", "hostname"),
        default="Hostname",
        help="spelling of the hostname label: Hostname (released dcgm-exporter 4.x, default) or hostname "
        f"(dcgm-exporter main); its value is ${ENV_NODE_NAME} or the host name",
    )
    parser.add_argument(
        "--replace-blanks-in-model-name",
        action="store_true",
        help="write dashes instead of spaces in the modelName label",
    )
    parser.add_argument("--machine", metavar="PROFILE", help="read a simulated machine instead of NVML")
    parser.add_argument(
        "--fault-file",
        type=Path,
        metavar="PATH",
        help="the simulated machine's fault journal (default: $KUBEGPU_FAULT_FILE or "
        "<tmp>/kubegpu-faults-<machine>.jsonl); pass the path given to 'kubegpu fault'",
    )
    parser.add_argument(
        "--driver-root",
        metavar="PATH",
        help=f"host path of the NVIDIA driver installation, where libnvidia-ml.so.1 is looked for (default: "
        f"${ENV_DRIVER_ROOT} or /)",
    )
    parser.add_argument(
        "--container-driver-root",
        metavar="PATH",
        help=f"where the driver root is mounted in the exporter's container, searched first (default: "
        f"${ENV_CONTAINER_DRIVER_ROOT} or /driver-root)",
    )
    parser.add_argument(
        "--print-default-counters", action="store_true", help="print the shipped counters file and exit"
    )
    return parser


class _Settings(argparse.Namespace):
    address: str | None
    collectors: str | None
    collect_interval: str | None
    kubernetes: bool | None
    pod_resources_socket: str | None
    nvidia_resource_names: str | None
    no_hostname: bool
    hostname_label: str
    replace_blanks_in_model_name: bool
    machine: str | None
    fault_file: Path | None
    driver_root: str | None
    container_driver_root: str | None
    print_default_counters: bool


def _env_bool(parser: argparse.ArgumentParser, name: str) -> bool:
    value = os.environ.get(name, "").strip()
    if not value:
        return False
    try:
        return boolean.parse_bool(value)
    except ValueError as exc:
        parser.error(f"${name}={value!r}: {exc}")


def _interval_ms(parser: argparse.ArgumentParser, args: _Settings) -> int:
    if args.collect_interval is not None:
        text, where = args.collect_interval, "--collect-interval"
    else:
        text, where = os.environ.get(ENV_INTERVAL, str(DEFAULT_INTERVAL_MS)), f"${ENV_INTERVAL}"
    try:
        value = int(text)
    except ValueError:
        parser.error(f"{where} {text!r}: expected a whole number of milliseconds")
    if value <= 0:
        parser.error(f"{where} {value}: must be a positive number of milliseconds")
    return value


def main(argv: Sequence[str]) -> int:
    from kubegpu.gpu import backends, errors
    from kubegpu.monitoring import counters, endpoint, render

    parser = _parser()
    args = parser.parse_args(list(argv), namespace=_Settings())
    if args.print_default_counters:
        sys.stdout.write(counters.default_text())
        return 0

    address_text = args.address or os.environ.get(ENV_ADDRESS) or DEFAULT_ADDRESS
    try:
        address = endpoint.parse_address(address_text)
    except ValueError as exc:
        parser.error(str(exc))
    interval_s = _interval_ms(parser, args) / 1000.0

    collectors = args.collectors or os.environ.get(ENV_COLLECTORS)
    try:
        if collectors:
            try:
                text = Path(collectors).read_text(encoding="utf-8")
            except OSError as exc:
                parser.error(f"counters file {collectors}: cannot read: {exc.strerror}")
            counter_set = counters.parse(text, collectors)
        else:
            counter_set = counters.parse(counters.default_text(), counters.DEFAULT_FILE_NAME)
    except counters.CountersError as exc:
        parser.error(str(exc))
    if not counter_set.values:
        parser.error(f"counters file {collectors}: enables no field this exporter can serve")

    socket_path = args.pod_resources_socket or os.environ.get(ENV_SOCKET)
    kubernetes = args.kubernetes if args.kubernetes is not None else _env_bool(parser, ENV_KUBERNETES)
    kubernetes = kubernetes or socket_path is not None
    extra_text = (
        args.nvidia_resource_names if args.nvidia_resource_names is not None else os.environ.get(ENV_RESOURCE_NAMES, "")
    )
    extra_resources = [name.strip() for name in extra_text.split(",") if name.strip()]

    options = render.LabelOptions(
        hostname_label=None if args.no_hostname else args.hostname_label,
        hostname=os.environ.get(ENV_NODE_NAME) or socket.gethostname(),
        replace_blanks_in_model_name=args.replace_blanks_in_model_name,
    )

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
        parser.error(str(exc))
    try:
        machine = backend.discover()
    except errors.GpuError as exc:
        print(f"kubegpu exporter: {exc}", file=sys.stderr)
        return 1
    for row in counter_set.unsupported:
        log.warning(
            "counter not available, skipped",
            extra={"field": row.name, "type": row.type, "line": row.line, "file": collectors or "default"},
        )

    from kubegpu.monitoring.collector import Collector as CollectorImpl

    pods = None
    if kubernetes:
        from kubegpu.monitoring.podresources import PodResourcesClient

        pods = PodResourcesClient(socket_path or constants.POD_RESOURCES_SOCKET)
    collector = CollectorImpl(backend, machine, counter_set, options, pods=pods, extra_resources=extra_resources)
    try:
        return asyncio.run(_serve(collector, endpoint.Endpoint(collector, address), interval_s, backend.name))
    except OSError as exc:
        print(f"kubegpu exporter: cannot listen on {address}: {exc.strerror or exc}", file=sys.stderr)
        return 1


async def _serve(collector: Collector, server: Endpoint, interval_s: float, backend_name: str) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await collector.collect_once()  # the first scrape already has data
    await server.start()
    log.info(
        "exporter listening",
        extra={"address": server.address, "backend": backend_name, "interval_s": interval_s},
    )
    try:
        await collector.run(interval_s, stop)
    finally:
        await server.stop()
        await collector.close()
        log.info("exporter stopped")
    return 0
