"""``mps-control-daemon mount-shm``: the tmpfs MPS clients share, at ``/mps/shm``, as NVIDIA's init container.

``/mps`` is the container path of the host's MPS root (``--mps-container-root`` /
``KUBEGPU_MPS_CONTAINER_ROOT`` move it, for tests only), so the tmpfs is ``<MPS_ROOT>/shm`` on the host: the
source of the ``/dev/shm`` mount the plugin puts into MPS clients' containers, and of the daemon's ``/dev/shm``.
Mounts a tmpfs with NVIDIA's options (``rw,nosuid,nodev,noexec,relatime``, ``size`` half of the node's memory, or
``65536k`` when /proc/meminfo cannot tell) unless something is mounted there already. Needs the privilege to
mount (the chart's MPS init container is privileged, with Bidirectional mount propagation so the host and the
plugin see it). Must not start MPS daemons.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from kubegpu.deviceplugin.config.flags import MPS_CONTAINER_ROOT

FALLBACK_SIZE = "65536k"
OPTIONS = "rw,nosuid,nodev,noexec,relatime"


def size(meminfo: str) -> str:
    """Half of ``MemTotal`` in kB (``size=`` of the mount), or the fallback."""
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemTotal":
            fields = rest.split()
            if fields and fields[0].isdigit() and int(fields[0]) > 1:
                return f"{int(fields[0]) // 2}k"
    return FALLBACK_SIZE


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="mps-control-daemon mount-shm", description=__doc__.splitlines()[0] if __doc__ else None
    )
    p.add_argument(
        "--mps-container-root",
        default=os.environ.get("KUBEGPU_MPS_CONTAINER_ROOT") or MPS_CONTAINER_ROOT,
        metavar="PATH",
        help=f"where the host's MPS root is mounted in this container (default {MPS_CONTAINER_ROOT}, as NVIDIA; "
        "only tests change it) [env KUBEGPU_MPS_CONTAINER_ROOT]",
    )
    args = p.parse_args(argv)
    target = Path(args.mps_container_root) / "shm"
    if os.path.ismount(target):
        print(f"{target} is already mounted")
        return 0
    try:
        target.mkdir(parents=True, exist_ok=True)
        meminfo = Path("/proc/meminfo").read_text()
    except OSError as exc:
        print(f"mps-control-daemon mount-shm: error: {target}: {exc.strerror}", file=sys.stderr)
        return 1
    options = f"{OPTIONS},size={size(meminfo)}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        print(
            f"mps-control-daemon mount-shm: error: mounting tmpfs at {target}: {done.stderr.strip()}", file=sys.stderr
        )
        return 1
    print(f"mounted tmpfs at {target} ({options})")
    return 0
