"""``kubegpu plugin``: the device plugin daemon's entry point.

Owns turning the command line, the environment and the config file (through
:func:`kubegpu.deviceplugin.config.effective.load`) into a running
:class:`~.supervisor.Supervisor`: ``--print-config`` prints the effective
config and exits, the effective config is logged once as JSON at start, the
optional metrics endpoint is opened for the life of the process, and SIGHUP
gets a function that reads the config again. Exit codes: 2 for bad input (a
flag, env value or config key, an unknown machine profile; one line naming the
key and the rule), 1 when the machine cannot be served, 0 after a clean stop.
Must not contain plugin logic.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubegpu.deviceplugin.config.effective import Config

log = logging.getLogger(__name__)


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    # No collections while start-up imports and builds what lives as long as the process (~7 % of the start's
    # CPU went to collections finding nothing to free); :func:`_run` freezes it all and turns the collector on.
    gc.disable()
    try:
        return _main(argv, environ)
    finally:
        gc.enable()


def _main(argv: list[str], environ: Mapping[str, str] | None) -> int:
    from kubegpu.deviceplugin.config import effective as config_mod
    from kubegpu.deviceplugin.config.v1 import ConfigError

    env = os.environ if environ is None else environ
    parser = config_mod.parser()
    args = parser.parse_args(argv)

    def load() -> Config:
        return config_mod.load(args, env)

    try:
        cfg = load()
    except ConfigError as exc:
        # One line, like every kubegpu usage error; argparse's usage block would bury it.
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        return _print_config(cfg)
    if cfg.options.machine is not None:
        from kubegpu.gpu import errors, profiles

        try:
            profiles.load(cfg.options.machine)
        except errors.ProfileError as exc:
            print(f"{parser.prog}: error: --machine {cfg.options.machine!r}: {exc}", file=sys.stderr)
            return 2
    if cfg.options.socket_dir:
        # Where the plugin's sockets go: created when missing (as the kubelet creates its own), else exit 2 now,
        # not a 30-second retry loop of binds that cannot succeed.
        try:
            os.makedirs(cfg.options.socket_dir, mode=0o750, exist_ok=True)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(
                f"{parser.prog}: error: --socket-dir {cfg.options.socket_dir}: cannot create it: {why}", file=sys.stderr
            )
            return 2
    if cfg.options.node_name:
        from kubegpu import kubeconfig

        try:
            kubeconfig.load(cfg.options.kubeconfig)
        except kubeconfig.KubeconfigError as exc:
            print(f"{parser.prog}: error: --node-name {cfg.options.node_name}: {exc}", file=sys.stderr)
            return 2
    return _run(cfg, load, env)


def _print_config(cfg: Config) -> int:
    """NVIDIA's "Running with config" JSON; under mixed it lists the node's MIG profiles, so the GPUs are read
    (the simulated machine of ``--machine``, else NVML: without it, a warning and none, as NVIDIA)."""
    import json

    mig: list[dict[str, str]] = []
    if cfg.flags.mig_strategy == "mixed":
        from pathlib import Path

        from kubegpu.deviceplugin.rm import migdefaults
        from kubegpu.gpu import backends, errors

        try:
            backend = backends.open_backend(
                cfg.options.machine,
                fault_file=Path(cfg.options.fault_file) if cfg.options.fault_file else None,
                driver_root=cfg.flags.nvidia_driver_root,
                container_driver_root=cfg.flags.plugin.container_driver_root,
            )
            try:
                mig = migdefaults.mixed_mig_resources(backend.discover())
            finally:
                backend.close()
        except errors.GpuError as exc:
            print(f"kubegpu plugin: warning: mig-strategy=mixed: no MIG resources listed: {exc}", file=sys.stderr)
    sys.stdout.write(json.dumps(cfg.running_config(mig), indent=2) + "\n")
    return 0


def _run(cfg: Config, load: Callable[[], Config], env: Mapping[str, str]) -> int:
    """Serve until stopped, with the metrics endpoint open for the whole life of the process."""
    from kubegpu.deviceplugin.config import effective as config_mod
    from kubegpu.deviceplugin.plugin.metrics import MetricsServer, PluginMetrics
    from kubegpu.deviceplugin.plugin.supervisor import Supervisor

    log.info("running with config", extra={"config": cfg.running_config()})
    metrics = PluginMetrics(enabled=cfg.options.metrics_listen is not None)
    endpoint: MetricsServer | None = None
    if cfg.options.metrics_listen is not None:
        host, port = config_mod.parse_listen(cfg.options.metrics_listen)
        try:
            endpoint = MetricsServer(metrics, host, port)
        except OSError as exc:
            log.error("cannot serve metrics", extra={"listen": cfg.options.metrics_listen, "error": str(exc)})
            return 1
        log.info("serving metrics", extra={"listen": f"{host}:{endpoint.port}", "path": "/metrics"})
    # What importing and configuring built (modules, protobuf descriptors, grpc) lives as long as the
    # process: out of the collector's reach, a full collection no longer walks it in the middle of an RPC.
    gc.freeze()
    gc.enable()
    try:
        return asyncio.run(Supervisor(cfg, reload=load, environ=env, metrics=metrics).run())
    finally:
        if endpoint is not None:
            endpoint.close()
