"""Run the in-process API server as a process of its own: ``python -m tests.kubeapi --kubeconfig FILE``.

For benchmarks (the server then has a core and a GIL to itself) and for trying kubegpu's API-side commands by
hand (``kubegpu scheduler --kubeconfig FILE``, kubectl). It writes the kubeconfig, prints one line with the URL once
it serves, and stops on SIGTERM or SIGINT. It holds no state across runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from .server import KubeApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kubeapi", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write the kubeconfig")
    parser.add_argument("--bookmark-interval", type=float, default=1.0, help="seconds between watch bookmarks")
    parser.add_argument(
        "--node-monitor-grace-period",
        type=float,
        default=None,
        help="seconds without a node status write or Lease renewal before a Node turns Unknown "
        "(off unless given; the real controller uses 40-50)",
    )
    args = parser.parse_args(argv)
    if not args.kubeconfig.parent.is_dir():
        print(f"--kubeconfig: directory {args.kubeconfig.parent} does not exist", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with KubeApiServer(
        args.kubeconfig,
        bookmark_interval=args.bookmark_interval,
        node_monitor_grace_period=args.node_monitor_grace_period,
    ) as server:
        print(f"serving {server.url} kubeconfig={args.kubeconfig}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
