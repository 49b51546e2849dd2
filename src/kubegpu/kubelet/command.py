"""``kubegpu kubelet``: run the emulator, or talk to a running one (``admit``, ``delete``, ``status``, ``watch``).

Owns the command line: flags, their defaults and checks, output (tables, or
``--json``), and exit codes (0 ok, 1 failure or rejection, 2 bad input). The
daemon and client are imported only when needed. Must not contain emulator
logic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kubegpu.api import constants

CLIENT_COMMANDS = ("admit", "delete", "status", "watch")

_DESCRIPTION = """\
The kubelet's device manager without a cluster: serves v1beta1.Registration on
<socket dir>/kubelet.sock, talks to device plugins like kubelet v1.32, admits pods,
keeps the checkpoint, serves the pod-resources API.

client commands (against a running emulator, same --socket-dir):
  kubegpu kubelet admit POD.yaml [--json]      admit a Pod manifest, print its containers' runtime options
  kubegpu kubelet delete NAMESPACE/NAME         delete a pod, releasing its devices
  kubegpu kubelet status [--json]               capacity, allocatable, devices, allocations
  kubegpu kubelet watch                         state-change events, one JSON object per line

node agent (with --kubeconfig): also plays Node NAME on that API server, like kwok with a real
device manager behind it: registers the Node (labels, taints, capacity; nvidia.com/* from the
plugins), keeps its Ready condition and kube-node-lease Lease, runs the pods bound to it.
"""


def _socket_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket-dir",
        type=Path,
        default=Path(constants.DEVICE_PLUGIN_PATH),
        metavar="DIR",
        help="device-plugin directory: kubelet.sock and the checkpoint live there "
        f"(default: {constants.DEVICE_PLUGIN_PATH})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number of seconds, got {text!r}")
    return value


#: Timeouts: 0 would fail every call at once, more than an hour is a typo.
TIMEOUT_RANGE_S = (0.0, 3600.0)


def _timeout(text: str) -> float:
    value = _seconds(text)
    low, high = TIMEOUT_RANGE_S
    if not low < value <= high:
        raise argparse.ArgumentTypeError(f"must be within ({low:g}, {high:g}] seconds, got {text!r}")
    return value


def _daemon_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubegpu kubelet", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _socket_dir_arg(parser)
    parser.add_argument(
        "--grace-period",
        type=_seconds,
        default=constants.ENDPOINT_STOP_GRACE_PERIOD_S,
        metavar="SECONDS",
        help="how long a resource whose plugin went away keeps its capacity before it is removed (default: 300)",
    )
    parser.add_argument(
        "--reproduce-reregistration-race",
        action="store_true",
        help="behave like kubelet 1.32 (kubernetes#121994): when an old plugin's stream ends, the live new "
        "registration of the same resource is disconnected. Default: the fixed upstream behaviour",
    )
    parser.add_argument(
        "--pod-resources-socket",
        type=Path,
        metavar="PATH",
        help="serve the pod-resources API v1 here (default: <socket dir>/../pod-resources/kubelet.sock)",
    )
    parser.add_argument("--no-pod-resources", action="store_true", help="do not serve the pod-resources API")
    parser.add_argument(
        "--topology-manager-policy",
        choices=("none", "best-effort", "restricted", "single-numa-node"),
        default="none",
        help="the topology manager's policy for device NUMA alignment (default: none)",
    )
    parser.add_argument(
        "--dial-timeout",
        type=_timeout,
        default=constants.DIAL_TIMEOUT_S,
        metavar="SECONDS",
        help="how long Register waits to connect to the plugin's socket (kubelet: 10)",
    )
    parser.add_argument(
        "--pre-start-timeout",
        type=_timeout,
        default=constants.PRE_START_CONTAINER_TIMEOUT_S,
        metavar="SECONDS",
        help="deadline of PreStartContainer (kubelet: 30)",
    )
    agent = parser.add_argument_group("node agent (only with --kubeconfig; kubelet flag names)")
    agent.add_argument("--kubeconfig", type=Path, metavar="FILE", help="play a Node on this kubeconfig's API server")
    agent.add_argument("--node-name", metavar="NAME", help="the Node's name (default: this host's name)")
    agent.add_argument("--node-labels", default="", metavar="K=V,...", help="labels added at registration")
    agent.add_argument(
        "--register-with-taints", default="", metavar="KEY[=VALUE]:EFFECT,...", help="taints the Node registers with"
    )
    agent.add_argument(
        "--node-status-update-frequency",
        default="10s",
        metavar="DURATION",
        help="how often the node status is computed (and sent when it changed) (default: 10s)",
    )
    agent.add_argument(
        "--node-status-report-frequency",
        default="5m",
        metavar="DURATION",
        help="send the node status at least this often even when unchanged (default: 5m)",
    )
    agent.add_argument(
        "--node-lease-duration-seconds",
        type=int,
        default=40,
        metavar="N",
        help="the Lease's leaseDurationSeconds; it is renewed every quarter of it (default: 40)",
    )
    agent.add_argument(
        "--capacity",
        default="",
        metavar="R=Q,...",
        help="non-device capacity, e.g. cpu=64,memory=1Ti (default: this host's cpu and memory)",
    )
    agent.add_argument("--max-pods", type=int, default=110, metavar="N", help="capacity 'pods' (default: 110)")
    agent.add_argument("--kube-reserved", default="", metavar="R=Q,...", help="subtracted from allocatable")
    agent.add_argument("--system-reserved", default="", metavar="R=Q,...", help="subtracted from allocatable")
    agent.add_argument(
        "--node-ip", default="127.0.0.1", metavar="IP", help="the Node's InternalIP (default: 127.0.0.1)"
    )
    return parser


def _client_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"kubegpu kubelet {command}")
    _socket_dir_arg(parser)
    if command == "admit":
        parser.description = "Admit a Pod manifest and print each container's runtime options."
        parser.add_argument("manifest", type=Path, metavar="POD.yaml", help="a Pod manifest (YAML or JSON)")
    elif command == "delete":
        parser.description = "Delete an admitted pod; its devices are released."
        parser.add_argument("target", metavar="NAMESPACE/NAME", help="the pod (NAME alone means namespace default)")
    elif command == "status":
        parser.description = "Capacity, allocatable, devices with health and NUMA, and allocations."
    else:
        parser.description = "Print state-change events as they happen, one JSON object per line (Ctrl-C ends)."
    if command != "watch":
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--timeout", type=_timeout, default=60.0, metavar="SECONDS", help="give up after this long")
    return parser


def main(argv: list[str]) -> int:
    if argv and argv[0] in CLIENT_COMMANDS:
        try:
            return _client(argv[0], argv[1:])
        except BrokenPipeError:
            # The reader went away (``| head``): not an error of ours; keep Python quiet at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    parser = _daemon_parser()
    args = parser.parse_args(argv)
    agent_config = None
    if args.kubeconfig is not None:
        try:
            agent_config = _agent_config(args)
        except ValueError as exc:
            parser.error(str(exc))
    else:
        given = [flag for flag in _AGENT_FLAGS if getattr(args, _dest(flag)) != parser.get_default(_dest(flag))]
        if given:
            parser.error(f"{given[0]} needs --kubeconfig (the node agent plays a Node on an API server)")
    return _run_daemon(args, agent_config)


def _exit_early(_sig: int, _frame: object) -> None:
    raise SystemExit(0)


_AGENT_FLAGS = (
    "--node-name",
    "--node-labels",
    "--register-with-taints",
    "--node-status-update-frequency",
    "--node-status-report-frequency",
    "--node-lease-duration-seconds",
    "--capacity",
    "--max-pods",
    "--kube-reserved",
    "--system-reserved",
    "--node-ip",
)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _host_capacity() -> dict[str, str]:
    capacity = {"cpu": str(os.cpu_count() or 1)}
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    capacity["memory"] = f"{int(line.split()[1])}Ki"
    except (OSError, ValueError, IndexError):
        pass
    return capacity


def _agent_config(args: argparse.Namespace) -> Any:
    """The agent's settings from the flags; ValueError naming the flag."""
    import ipaddress
    import socket
    from fractions import Fraction

    from kubegpu.kubelet.agent import config
    from kubegpu.kubelet.pod import parse_quantity

    name = args.node_name or socket.gethostname().lower()
    problem = config.node_name_error(name)
    if problem:
        raise ValueError(f"--node-name: {name!r} is not a valid node name: {problem}")
    try:
        ipaddress.ip_address(args.node_ip)
    except ValueError:
        raise ValueError(f"--node-ip: {args.node_ip!r} is not an IP address") from None
    if args.max_pods < 0:
        raise ValueError(f"--max-pods: must not be negative, got {args.max_pods}")
    if args.node_lease_duration_seconds <= 0:
        raise ValueError(f"--node-lease-duration-seconds: must be positive, got {args.node_lease_duration_seconds}")
    capacity = {**_host_capacity(), "pods": str(args.max_pods), **config.parse_resources(args.capacity, "--capacity")}
    reserved: dict[str, Fraction] = {}
    for flag, text in (("--kube-reserved", args.kube_reserved), ("--system-reserved", args.system_reserved)):
        for resource, value in config.parse_resources(text, flag).items():
            reserved[resource] = reserved.get(resource, Fraction(0)) + parse_quantity(value)
    return config.AgentConfig(
        node_name=name,
        kubeconfig=args.kubeconfig,
        labels=config.parse_labels(args.node_labels),
        taints=config.parse_taints(args.register_with_taints),
        capacity=capacity,
        reserved=reserved,
        status_update_frequency=config.parse_duration(
            args.node_status_update_frequency, "--node-status-update-frequency"
        ),
        status_report_frequency=config.parse_duration(
            args.node_status_report_frequency, "--node-status-report-frequency"
        ),
        lease_duration=args.node_lease_duration_seconds,
        internal_ip=args.node_ip,
    )


def _run_daemon(args: argparse.Namespace, agent_config: Any = None) -> int:
    # gRPC core prints its own INFO lines (e.g. a plugin's GOAWAY) to stderr, which would break our
    # one-event-per-line logs; our logs already say what happened. Must be set before grpc loads.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    # Until the daemon's own handlers take over (before it binds anything): SIGHUP never kills it (exit 129),
    # SIGTERM/SIGINT end it cleanly, with nothing to clean up yet.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_early)
    from kubegpu.kubelet import daemon, errors

    options = daemon.Options(
        socket_dir=args.socket_dir,
        grace_period=args.grace_period,
        reregistration_race=args.reproduce_reregistration_race,
        pod_resources_socket=args.pod_resources_socket,
        serve_pod_resources=not args.no_pod_resources,
        dial_timeout=args.dial_timeout,
        pre_start_timeout=args.pre_start_timeout,
        topology_policy=args.topology_manager_policy,
    )

    make_agent = None
    if agent_config is not None:
        from kubegpu import kubeconfig as kubeconfigs
        from kubegpu.kubelet.agent import agent

        try:
            kubeconfig = kubeconfigs.load(str(agent_config.kubeconfig))
        except kubeconfigs.KubeconfigError as exc:
            print(f"kubegpu kubelet: {exc}", file=sys.stderr)
            return 2

        def make_agent(node: Any) -> Any:
            return agent.NodeAgent(node, agent_config, kubeconfig)

    async def run() -> None:
        await daemon.Daemon(options, make_agent).run()

    try:
        asyncio.run(run())
    except errors.PodStoreError as exc:  # bad input: the operator's file
        print(f"kubegpu kubelet: {exc}", file=sys.stderr)
        return 2
    except errors.KubeletError as exc:
        print(f"kubegpu kubelet: {exc}", file=sys.stderr)
        return 1
    return 0


def _client(command: str, argv: list[str]) -> int:
    from kubegpu.kubelet import client, errors, render

    parser = _client_parser(command)
    args = parser.parse_args(argv)
    try:
        if command == "admit":
            try:
                result = client.admit(args.manifest, args.socket_dir, timeout=args.timeout)
            except errors.PodManifestError as exc:
                parser.error(str(exc))
            _print(result, args.json, render.admitted)
        elif command == "delete":
            try:
                client.split_target(args.target)
            except ValueError as exc:
                parser.error(str(exc))
            result = client.delete(args.target, args.socket_dir, timeout=args.timeout)
            if args.json:
                print(json.dumps(result, indent=2))
            else:
                ref = result["deleted"]
                freed = [
                    f"{r}: {', '.join(ids)}" for held in result["freed"].values() for r, ids in held.items() if ids
                ]
                print(
                    f"pod {ref['namespace']}/{ref['name']} deleted" + (f"; freed {'; '.join(freed)}" if freed else "")
                )
        elif command == "status":
            _print(client.status(args.socket_dir, timeout=args.timeout), args.json, render.status)
        else:
            return _watch(args.socket_dir)
    except errors.KubeletUnavailable as exc:
        print(f"kubegpu kubelet {command}: {exc}", file=sys.stderr)
        return 1
    except errors.ControlError as exc:
        if exc.is_bad_input:
            parser.error(exc.message)
        if command == "admit" and exc.reason == "CreateContainerConfigError" and getattr(args, "json", False):
            print(json.dumps(exc.detail, indent=2))
        print(f"kubegpu kubelet {command}: {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _print(result: Any, as_json: bool, table: Any) -> None:
    print(json.dumps(result, indent=2) if as_json else table(result))


def _watch(socket_dir: Path) -> int:
    from kubegpu.kubelet import client

    try:
        with client.watch(socket_dir) as events:
            for event in events:
                print(json.dumps(event), flush=True)
    except KeyboardInterrupt:
        return 0
    return 0
