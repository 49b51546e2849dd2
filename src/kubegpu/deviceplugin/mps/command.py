"""``kubegpu mps-daemon``: start one MPS control daemon per MPS-shared resource, keep them, stop them.

Owns the command line (NVIDIA's ``mps-control-daemon`` flags ``--config-file``
and ``--mig-strategy``, plus ``--mps-container-root``, ``--machine``,
``--control-program`` and ``--nvidia-smi``) and the lifecycle: load the config,
build the resources, start every daemon under the container root (``/mps``, where
NVIDIA's chart mounts the host's MPS root), write ``/mps/.ready``; SIGHUP stops them all and
starts again from a re-read config; SIGTERM/SIGINT stop them and exit 0. A
failed start stops what was started and exits 1 (the DaemonSet restarts it).
Must not build Allocate responses or serve gRPC.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from kubegpu.deviceplugin.config import effective
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.mps import control, sharing
from kubegpu.deviceplugin.rm import resource_map
from kubegpu.deviceplugin.signals import Signals

log = logging.getLogger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu mps-daemon",
        description="Run nvidia-cuda-mps-control for every resource shared with MPS (sharing.mps in the config): "
        "exclusive compute mode, per-client memory limit and active-thread percentage, readiness files.",
    )
    effective.add_mps_arguments(p)
    p.add_argument(
        "--control-program",
        default=os.environ.get("MPS_CONTROL_PROGRAM", control.CONTROL_PROGRAM),
        metavar="PATH",
        help=f"the MPS control program [env MPS_CONTROL_PROGRAM] (default {control.CONTROL_PROGRAM})",
    )
    p.add_argument(
        "--nvidia-smi",
        default=os.environ.get("NVIDIA_SMI", control.NVIDIA_SMI),
        metavar="COMMAND",
        help="command that sets compute modes, '' to leave them alone [env NVIDIA_SMI] (default nvidia-smi)",
    )
    return p


def _load(args: argparse.Namespace, env: Mapping[str, str]) -> Config:
    cfg = effective.load_mps(args, env)
    effective.validate_flags(cfg, plugin_flags=False)
    return cfg


def _root(cfg: Config) -> Path:
    """Where the daemons' pipes, logs and readiness files go: the MPS root as this container sees it."""
    return Path(cfg.options.mps_container_root)


def _daemons(cfg: Config, args: argparse.Namespace) -> list[control.Daemon]:
    """Raises ResourceMapError / GpuError when the machine cannot be shared as configured."""
    from kubegpu.gpu.backends import read_machine

    machine = read_machine(cfg.options.machine, driver_root=cfg.flags.nvidia_driver_root)
    resources = resource_map.build(machine, cfg)
    plans = sharing.daemons(resources, machine, _root(cfg))
    smi = shlex.split(args.nvidia_smi)
    return [control.Daemon(p, control=args.control_program, nvidia_smi=smi) for p in plans]


def _start(daemons: list[control.Daemon], root: Path) -> None:
    started: list[control.Daemon] = []
    try:
        for daemon in daemons:
            daemon.start()
            started.append(daemon)
    except control.MpsError:
        _stop(started, root)
        raise
    if daemons:
        control.ready_file(root).touch()
    log.info("MPS daemons ready", extra={"resources": [d.plan.resource for d in daemons]})


def _stop(daemons: list[control.Daemon], root: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        control.ready_file(root).unlink()
    for daemon in reversed(daemons):
        try:
            daemon.stop()
        except control.MpsError as exc:
            log.error("MPS daemon did not stop cleanly", extra={"resource": daemon.plan.resource, "error": str(exc)})


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    from kubegpu.gpu import errors

    env = os.environ if environ is None else environ
    args = parser().parse_args(argv)
    with Signals().installed() as signals:
        while True:
            try:
                cfg = _load(args, env)
                daemons = _daemons(cfg, args)
            except ConfigError as exc:
                return _bad_input(exc)
            except errors.ProfileError as exc:
                return _bad_input(exc)
            except DevicePluginError as exc:
                return _failed(exc)
            except errors.GpuError as exc:
                return _failed(exc)
            root = _root(cfg)
            if not daemons:
                log.info("no resource is shared with MPS; nothing to start")
            try:
                _start(daemons, root)
            except DevicePluginError as exc:
                return _failed(exc)
            signals.sleep(math.inf)
            _stop(daemons, root)
            if signals.stop:
                return 0
            signals.hangup = False
            log.info("restarting MPS daemons (SIGHUP)")


def _bad_input(exc: Exception) -> int:
    print(f"kubegpu mps-daemon: error: {exc}", file=sys.stderr)
    return 2


def _failed(exc: Exception) -> int:
    print(f"kubegpu mps-daemon: {exc}", file=sys.stderr)
    return 1
