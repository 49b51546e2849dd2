"""The plugin's command line: flags, their environment variables and defaults, in one place.

Owns parsing ``kubegpu plugin`` arguments into :class:`PluginOptions` and
rejecting bad values with an error that names the flag (exit 2). Issue 3's
NVIDIA-compatible config (``config.py``: every NVIDIA flag, env var and the
config file) replaces :func:`parse`; the rest of the plugin only sees
:class:`PluginOptions`. Must not start anything.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubegpu.api import constants
from kubegpu.deviceplugin import health

#: NVIDIA retries every plugin this long after a failed start (registration refused, server not answering).
DEFAULT_RETRY_INTERVAL_S = 30.0


@dataclass(frozen=True)
class PluginOptions:
    """What the plugin runs with.

    ``kubelet_socket``: the kubelet's registration socket; plugin sockets go beside it.
    ``machine``: simulated machine profile, or None for NVML.
    ``fault_file``: the simulated machine's fault journal (None: the profile's default).
    ``quiet_period_s``: seconds without a new fault after which a device is Healthy again; 0 = only on recovery.
    ``retry_interval_s``: wait after a failed start before starting all resources again.
    """

    kubelet_socket: Path = Path(constants.KUBELET_SOCKET)
    machine: str | None = None
    fault_file: Path | None = None
    quiet_period_s: float = health.DEFAULT_QUIET_PERIOD_S
    retry_interval_s: float = DEFAULT_RETRY_INTERVAL_S

    @property
    def socket_dir(self) -> Path:
        return self.kubelet_socket.parent


def _seconds(flag: str) -> type:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} needs a number of seconds, got {text!r}") from None
        if not value >= 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{flag} must be a finite number of seconds >= 0, got {text!r}")
        return value

    parse.__name__ = "seconds"
    return parse  # type: ignore[return-value]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu plugin",
        description="The device plugin: advertises nvidia.com/gpu to the kubelet, keeps device health, answers "
        "Allocate and GetPreferredAllocation. Re-registers when the kubelet restarts; SIGHUP restarts it, "
        "SIGTERM/SIGINT stop it.",
    )
    p.add_argument(
        "--kubelet-socket",
        metavar="PATH",
        help=f"the kubelet's registration socket (env KUBELET_SOCKET; default {constants.KUBELET_SOCKET}); "
        "the plugin socket nvidia-gpu.sock is created beside it",
    )
    p.add_argument(
        "--machine",
        metavar="PROFILE",
        help="run on a simulated machine (a shipped profile such as dgx-a100, or a profile file) instead of NVML",
    )
    p.add_argument(
        "--fault-file",
        metavar="PATH",
        type=Path,
        help="the simulated machine's fault journal "
        "(default: $KUBEGPU_FAULT_FILE or <tmp>/kubegpu-faults-<machine>.jsonl)",
    )
    p.add_argument(
        "--health-recovery-quiet-period",
        metavar="SECONDS",
        type=_seconds("--health-recovery-quiet-period"),
        default=health.DEFAULT_QUIET_PERIOD_S,
        help="a device marked Unhealthy by an XID, ECC or event-wait error is Healthy again after this long "
        f"without a new fault (default {health.DEFAULT_QUIET_PERIOD_S:g}); 0 = only a recovery event heals; "
        "a lost GPU always waits for recovery",
    )
    p.add_argument(
        "--registration-retry-interval",
        metavar="SECONDS",
        type=_seconds("--registration-retry-interval"),
        default=DEFAULT_RETRY_INTERVAL_S,
        help=f"after a failed start (registration refused), start again after this long (default "
        f"{DEFAULT_RETRY_INTERVAL_S:g}, as NVIDIA); a new kubelet socket retries at once",
    )
    return p


def parse(argv: Sequence[str], env: Mapping[str, str] | None = None) -> PluginOptions:
    """Options from ``argv`` and ``env`` (flag > env > default); exits 2 with a message naming the flag."""
    env = os.environ if env is None else env
    p = parser()
    args = p.parse_args(list(argv))
    kubelet_socket = args.kubelet_socket if args.kubelet_socket is not None else env.get("KUBELET_SOCKET")
    if kubelet_socket is None:
        kubelet_socket = constants.KUBELET_SOCKET
    if not kubelet_socket:
        p.error("--kubelet-socket (KUBELET_SOCKET) must not be empty: running without a kubelet is not supported")
    path = Path(kubelet_socket)
    if path.name in ("", ".", "..") or kubelet_socket.endswith("/"):
        p.error(f"--kubelet-socket {kubelet_socket!r}: needs the socket file's path, e.g. .../kubelet.sock")
    return PluginOptions(
        kubelet_socket=path.absolute(),
        machine=args.machine,
        fault_file=args.fault_file,
        quiet_period_s=args.health_recovery_quiet_period,
        retry_interval_s=args.registration_retry_interval,
    )
