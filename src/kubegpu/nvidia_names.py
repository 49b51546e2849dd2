"""NVIDIA's command names as console scripts, so NVIDIA's Helm chart can run our image unchanged.

``nvidia-device-plugin`` is ``kubegpu plugin``, ``gpu-feature-discovery`` is ``kubegpu labels``,
``mps-control-daemon`` is ``kubegpu mps-daemon`` (its ``mount-shm`` subcommand: :mod:`kubegpu.mpsshm`) and
``config-manager`` is ``kubegpu config-manager``, with the same flags and env vars. Must not hold command logic:
each name only picks the command.
"""

from __future__ import annotations

import sys

from kubegpu import cli


def _run(command: str) -> int:
    return cli.main([command, *sys.argv[1:]])


def device_plugin() -> int:
    return _run("plugin")


def gpu_feature_discovery() -> int:
    return _run("labels")


def mps_control_daemon() -> int:
    if sys.argv[1:2] == ["mount-shm"]:  # NVIDIA's init-container subcommand
        from kubegpu import mpsshm

        return mpsshm.main(sys.argv[2:])
    return _run("mps-daemon")


def config_manager() -> int:
    return _run("config-manager")
