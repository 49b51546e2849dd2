"""``kubegpu labels``: GPU feature discovery labels written as an NFD feature file, once or in a loop.

Owns the command line (GFD's flags and env vars: ``--oneshot``, ``--no-timestamp``,
``--sleep-interval``, ``--output-file``/``-o``, ``--machine-type-file``,
``--mig-strategy``, ``--config-file``, plus ``--machine``), reading the machine
(a simulated profile or NVML) and its machine type, writing the feature file
(atomically, or ``-`` for stdout), and the relabel loop: every sleep interval,
SIGHUP reloads the config, SIGTERM/SIGINT stop it and remove the file (kept
with ``--oneshot`` or an ``infinite`` interval, as GFD). Must not compute
labels (that is :mod:`kubegpu.deviceplugin.gfd.labels`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kubegpu.deviceplugin import atomicfile
from kubegpu.deviceplugin.config import effective, flags
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.gfd import labels
from kubegpu.deviceplugin.signals import Signals
from kubegpu.gpu.model import Machine

log = logging.getLogger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu labels",
        description="GPU feature discovery labels (nvidia.com/gpu.product, .count, .memory, MIG, sharing, "
        "driver and CUDA versions) in the Node Feature Discovery feature-file format.",
    )
    effective.add_gfd_arguments(p)
    return p


def machine_type(cfg: Config, machine: Machine | None, simulated: bool) -> str:
    """The DMI product name: a simulated machine's own unless a file was named; ``unknown`` when unreadable."""
    path = cfg.flags.gfd.machine_type_file
    if simulated and machine is not None and path == flags.DEFAULT_MACHINE_TYPE_FILE:
        return machine.machine_type
    try:
        return Path(path).read_text().strip() or "unknown"
    except OSError as exc:
        log.warning("cannot read the machine type", extra={"file": path, "error": exc.strerror})
        return "unknown"


def discover(cfg: Config) -> Machine:
    """The machine to label: the ``--machine`` profile, else NVML. Raises ``kubegpu.gpu.errors.GpuError``."""
    from kubegpu.gpu.backends import read_machine

    return read_machine(cfg.options.machine, driver_root=cfg.flags.nvidia_driver_root)


def render(cfg: Config, clock: Callable[[], float] = time.time) -> str:
    """The feature file for the current machine and config. Raises GpuError / LabelError."""
    from kubegpu.gpu import errors

    try:
        machine = discover(cfg)
    except errors.ProfileError:
        raise
    except errors.GpuError as exc:
        if cfg.flags.fail_on_init_error:
            raise
        log.warning("no GPU labels: cannot read the GPUs", extra={"error": str(exc)})
        stamp = {} if cfg.flags.gfd.no_timestamp else {"nvidia.com/gfd.timestamp": str(int(clock()))}
        return labels.feature_file(stamp)
    values = labels.labels(
        machine,
        cfg,
        machine_type=machine_type(cfg, machine, cfg.options.machine is not None),
        timestamp=None if cfg.flags.gfd.no_timestamp else int(clock()),
    )
    return labels.feature_file(values)


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    p = parser()
    args = p.parse_args(argv)
    try:
        cfg = effective.load_gfd(args, env)
    except ConfigError as exc:
        print(f"kubegpu labels: error: {exc}", file=sys.stderr)
        return 2
    if cfg.flags.gfd.oneshot:
        return _label_once(cfg)
    with Signals().installed() as signals:
        return _loop(cfg, args, env, signals)


def _label_once(cfg: Config) -> int:
    from kubegpu.gpu import errors

    output = cfg.flags.gfd.output_file
    try:
        text = render(cfg)
    except errors.ProfileError as exc:
        print(f"kubegpu labels: error: {exc}", file=sys.stderr)
        return 2
    except errors.GpuError as exc:
        print(f"kubegpu labels: {exc}", file=sys.stderr)
        return 1
    except DevicePluginError as exc:
        print(f"kubegpu labels: {exc}", file=sys.stderr)
        return 1
    if output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    try:
        atomicfile.write(Path(output), text)
    except OSError as exc:
        print(f"kubegpu labels: cannot write {output}: {exc.strerror}", file=sys.stderr)
        return 1
    log.info("labels written", extra={"file": output, "labels": text.count("\n")})
    return 0


def _loop(cfg: Config, args: argparse.Namespace, env: Mapping[str, str], signals: Signals) -> int:
    while True:
        status = _label_once(cfg)
        if status != 0:
            return status
        output = cfg.flags.gfd.output_file
        interval = cfg.flags.gfd.sleep_interval_s
        signals.sleep(interval)
        if signals.stop:
            if output != "-" and not math.isinf(interval):
                with contextlib.suppress(FileNotFoundError):
                    Path(output).unlink()
            return 0
        if signals.hangup:
            signals.hangup = False
            try:
                cfg = effective.load_gfd(args, env)
                log.info("config reloaded")
            except ConfigError as exc:
                log.error("config reload failed; keeping the previous config", extra={"error": str(exc)})
