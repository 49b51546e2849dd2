"""``kubegpu scheduler``: flags and config file in, the live scheduler run until a signal.

Owns the command line (kube-scheduler's flag names: ``--config``,
``--kubeconfig``, ``--leader-elect*``, plus ``--metrics-listen``), reading the
config file, the exit codes (2 for a bad flag, config or kubeconfig, named in
one line; 1 when the lease is lost, as kube-scheduler exits then; 0 after
SIGTERM/SIGINT, with the lease released) and wiring client, elector, metrics
server and scheduler together. Must not schedule.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from pathlib import Path

import yaml
from lightkube import AsyncClient, KubeConfig

from kubegpu import kubeconfig
from kubegpu.scheduling.core.errors import SchedulingError
from kubegpu.scheduling.live import apiwrites, config, serving
from kubegpu.scheduling.live.leader import LeaderElector
from kubegpu.scheduling.live.scheduler import LiveScheduler

log = logging.getLogger("kubegpu.scheduler")


class UsageError(SchedulingError):
    """Bad input; the message is the one line the user sees."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu scheduler",
        description="GPU-aware scheduling of pods whose spec.schedulerName is one of the profiles "
        "(default profile: gpu-scheduler, NodeResourcesFit MostAllocated with nvidia.com/gpu weight 100).",
    )
    p.add_argument("--config", help="KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)")
    p.add_argument(
        "--leader-elect",
        nargs="?",
        const=True,
        default=None,
        type=_bool,
        metavar="BOOL",
        help="elect a leader on a Lease (default true; a bare flag means true)",
    )
    p.add_argument("--leader-elect-lease-duration", default=None, metavar="DURATION", help="default 15s")
    p.add_argument("--leader-elect-renew-deadline", default=None, metavar="DURATION", help="default 10s")
    p.add_argument("--leader-elect-retry-period", default=None, metavar="DURATION", help="default 2s")
    p.add_argument("--leader-elect-resource-name", default=None, help="Lease name (default kubegpu-scheduler)")
    p.add_argument("--leader-elect-resource-namespace", default=None, help="Lease namespace (default kube-system)")
    p.add_argument("--metrics-listen", default="0.0.0.0:10251", metavar="HOST:PORT", help="/metrics, /healthz, /readyz")
    return p


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {value!r}")


def load_config(path: str | None) -> config.SchedulerConfig:
    """The file's configuration, or the built-in default; raises UsageError naming file and key."""
    if path is None:
        return config.default_config()
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"--config {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    try:
        return config.parse(raw)
    except config.ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from exc


def apply_flags(cfg: config.SchedulerConfig, args: argparse.Namespace) -> config.SchedulerConfig:
    """Flags win over the file's leaderElection block."""
    le = cfg.leader_election
    changes: dict[str, object] = {}
    if args.leader_elect is not None:
        changes["leader_elect"] = args.leader_elect
    for flag, key in (
        ("leader_elect_lease_duration", "lease_duration"),
        ("leader_elect_renew_deadline", "renew_deadline"),
        ("leader_elect_retry_period", "retry_period"),
    ):
        value = getattr(args, flag)
        if value is not None:
            try:
                changes[key] = config.parse_duration("--" + flag.replace("_", "-"), value)
            except config.ConfigError as exc:
                raise UsageError(str(exc)) from exc
    if args.leader_elect_resource_name is not None:
        changes["resource_name"] = args.leader_elect_resource_name
    if args.leader_elect_resource_namespace is not None:
        changes["resource_namespace"] = args.leader_elect_resource_namespace
    le = dataclasses.replace(le, **changes)  # type: ignore[arg-type]
    try:
        le.validate()
    except config.ConfigError as exc:
        raise UsageError(f"leader election: {exc}") from exc
    return dataclasses.replace(cfg, leader_election=le)


def listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--metrics-listen: expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def kube_config(path: str | None) -> KubeConfig:
    try:
        return kubeconfig.load(path)
    except kubeconfig.KubeconfigError as exc:
        raise UsageError(str(exc)) from exc


async def run(cfg: config.SchedulerConfig, kube: KubeConfig, host: str, port: int) -> int:
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request is the API server's audit log
    metrics, health = serving.Metrics(), serving.Health()
    server, bound_port = serving.serve(metrics, health, host, port)
    client = AsyncClient(config=kube, field_manager="kubegpu-scheduler")
    ident = apiwrites.identity()
    elector = LeaderElector(client, cfg.leader_election, ident) if cfg.leader_election.leader_elect else None
    scheduler = LiveScheduler(client, cfg, ident, elector, metrics, health)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "scheduler started",
        extra={
            "profiles": [p.scheduler_name for p in cfg.profiles],
            "metrics_port": bound_port,
            "identity": ident,
            "leader_elect": elector is not None,
        },
    )
    tasks = [asyncio.ensure_future(scheduler.run()), asyncio.ensure_future(stop.wait())]
    if elector is not None:
        tasks.append(asyncio.ensure_future(elector.run()))
    code = 0
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if elector is not None and elector.lost.is_set():
            code = 1
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error("scheduler stopped", exc_info=task.exception())
                code = 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await scheduler.stop()
        if elector is not None:
            await elector.release()
        await client.close()
        server.shutdown()
    log.info("scheduler stopped", extra={"bound": scheduler.bound, "exit_code": code})
    return code


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = apply_flags(load_config(args.config), args)
        host, port = listen_address(args.metrics_listen)
        kube = kube_config(args.kubeconfig)
    except UsageError as exc:
        print(f"kubegpu scheduler: error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run(cfg, kube, host, port))
