"""``kubegpu labels``: GPU feature discovery labels, published once or in a loop.

Owns the command line (every flag and env var of NVIDIA's ``gpu-feature-discovery``, declared in
:mod:`kubegpu.deviceplugin.config.flags`, plus ``--machine``), reading the machine (a simulated profile or
NVML) and its machine type, choosing the output (:mod:`.outputs`: the ``NodeFeature`` object with
``--use-node-feature-api``, GFD's default, else the NFD feature file or stdout) and the relabel loop: every
sleep interval; SIGHUP reloads the config and labels again; SIGTERM/SIGINT stop it and remove the feature file
(kept with ``--oneshot`` or an ``infinite`` interval; the NodeFeature object is kept, as GFD keeps it). In the
loop a failed API write is logged and retried at the next round. Must not compute labels (that is
:mod:`kubegpu.deviceplugin.gfd.labels`) or make API calls itself.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kubegpu.deviceplugin.config import effective, flags
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.gfd import labels, outputs
from kubegpu.deviceplugin.signals import Signals
from kubegpu.gpu.model import Machine

log = logging.getLogger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu labels",
        description="GPU feature discovery labels (nvidia.com/gpu.product, .count, .memory, MIG, sharing, "
        "NVLink clique, vGPU, driver and CUDA versions), published as GFD does: the NodeFeature object "
        "nvidia-features-for-<node> through the API (default), or with --use-node-feature-api=false the Node "
        "Feature Discovery feature file.",
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

    return read_machine(
        cfg.options.machine,
        driver_root=cfg.flags.nvidia_driver_root,
        container_driver_root=cfg.flags.plugin.container_driver_root,
    )


def compute(cfg: Config, clock: Callable[[], float] = time.time) -> dict[str, str]:
    """The labels of the current machine under ``cfg``. Raises GpuError / LabelError."""
    from kubegpu.gpu import errors

    try:
        machine = discover(cfg)
    except errors.ProfileError:
        raise
    except errors.GpuError as exc:
        if cfg.flags.fail_on_init_error:
            raise
        log.warning("no GPU labels: cannot read the GPUs", extra={"error": str(exc)})
        return {} if cfg.flags.gfd.no_timestamp else {"nvidia.com/gfd.timestamp": str(int(clock()))}
    return labels.labels(
        machine,
        cfg,
        machine_type=machine_type(cfg, machine, cfg.options.machine is not None),
        timestamp=None if cfg.flags.gfd.no_timestamp else int(clock()),
    )


def render(cfg: Config, clock: Callable[[], float] = time.time) -> str:
    """The feature file for the current machine and config. Raises GpuError / LabelError."""
    return labels.feature_file(compute(cfg, clock))


def output_for(cfg: Config) -> outputs.Output:
    """Where ``cfg`` sends the labels: the NodeFeature object (``--use-node-feature-api``) or the feature file."""
    if cfg.flags.use_node_feature_api:
        opts = cfg.options
        assert opts.node_name  # checked by effective.load_gfd
        return outputs.NodeFeatureApi(opts.node_name, opts.namespace, opts.pod_name, opts.kubeconfig)
    return outputs.FeatureFile(cfg.flags.gfd.output_file)


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    p = parser()
    args = p.parse_args(argv)
    try:
        cfg = effective.load_gfd(args, env)
    except ConfigError as exc:
        print(f"kubegpu labels: error: {exc}", file=sys.stderr)
        return 2
    problem = _unsupported(cfg)
    if problem:
        print(f"kubegpu labels: error: {problem}", file=sys.stderr)
        return 2
    log.info("running with config", extra={"config": cfg.to_dict()})
    if cfg.flags.gfd.oneshot:
        output = output_for(cfg)
        try:
            return _label_once(cfg, output)
        finally:
            output.close(remove=False)
    with Signals().installed() as signals:
        return _loop(cfg, args, env, signals)


def _unsupported(cfg: Config) -> str | None:
    """What GFD accepts and kubegpu cannot do (bad input: exit 2)."""
    if cfg.flags.device_discovery_strategy == "vfio":
        return (
            "--device-discovery-strategy vfio is not supported: kubegpu reads GPUs through NVML (auto, nvml, tegra) "
            "or a simulated --machine, not GPUs bound to vfio-pci"
        )
    return None


def _label_once(cfg: Config, output: outputs.Output, *, keep_going: bool = False) -> int:
    """One labelling: 0 written, 2 bad input (a profile), 1 anything else (the GPUs, the labels, the output).

    ``keep_going``: a failed output write is logged and answered 0 (the loop writes again next round)."""
    from kubegpu.gpu import errors

    try:
        values = compute(cfg)
    except errors.ProfileError as exc:
        print(f"kubegpu labels: error: {exc}", file=sys.stderr)
        return 2
    except (errors.GpuError, DevicePluginError) as exc:
        print(f"kubegpu labels: {exc}", file=sys.stderr)
        return 1
    if len(values) <= 1:
        log.warning("no labels generated from any source")
    try:
        output.write(values)
    except outputs.OutputError as exc:
        if keep_going:
            log.error("labels not written; writing again next round", extra={"error": str(exc)})
            return 0
        print(f"kubegpu labels: {exc}", file=sys.stderr)
        return 1
    return 0


def _removes_on_exit(cfg: Config) -> bool:
    """GFD removes its feature file on exit, except after ``--oneshot`` (and kubegpu: an ``infinite`` interval)."""
    return not cfg.flags.use_node_feature_api and not math.isinf(cfg.flags.gfd.sleep_interval_s)


def _loop(cfg: Config, args: argparse.Namespace, env: Mapping[str, str], signals: Signals) -> int:
    output = output_for(cfg)
    try:
        while True:
            # The API away is no reason to die: the next round writes again (GFD would exit and be restarted).
            status = _label_once(cfg, output, keep_going=cfg.flags.use_node_feature_api)
            if status != 0:
                return status
            signals.sleep(cfg.flags.gfd.sleep_interval_s)
            if signals.stop:
                output.close(remove=_removes_on_exit(cfg))
                return 0
            if signals.hangup:
                signals.hangup = False
                try:
                    new = effective.load_gfd(args, env)
                    problem = _unsupported(new)
                    if problem:
                        raise ConfigError(problem)
                except ConfigError as exc:
                    log.error("config reload failed; keeping the previous config", extra={"error": str(exc)})
                    continue
                log.info("config reloaded; running with config", extra={"config": new.to_dict()})
                if _target(new) != _target(cfg):
                    output.close(remove=_removes_on_exit(cfg))
                    output = output_for(new)
                cfg = new
    finally:
        output.close(remove=False)


def _target(cfg: Config) -> tuple[str, ...]:
    """What identifies an output: a reload that changes it closes the old one (removing an old feature file)."""
    opts = cfg.options
    if cfg.flags.use_node_feature_api:
        return ("api", opts.node_name or "", opts.namespace, opts.pod_name, opts.kubeconfig or "")
    return ("file", cfg.flags.gfd.output_file)
