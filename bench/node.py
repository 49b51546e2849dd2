"""Benchmark a simulated GPU node: `kubegpu kubelet` and `kubegpu plugin` as real processes.

Prints the figures of issues 2 and 16 as plain lines, each with its target (issue 16's):

    start -> registered (ms)                 <= 150    plugin process spawned -> the emulator applied Register
    plugin CPU time when registered (ms)               what the start costs whatever else the machine runs
    SIGTERM -> exit, sockets removed (ms)    <= 50     signal sent -> the process exited (0), its socket gone
    plugin RSS after registering (MiB)       <= 42     VmRSS of the plugin process, registered and listed
    kubelet.sock re-created -> re-registered <= 50     the new kubelet.sock's ctime -> the emulator applied Register
    fault -> kubelet sees Unhealthy (ms)     <= 20     fault journal write -> the emulator applied the snapshot
    Allocate p50/p99/max (ms), 1 and 8 GPUs  0.5/1.2/3 a kubelet-like gRPC client on the plugin socket

then GetPreferredAllocation (4 of 8 GPUs) p50/p99/max on the same plugin, the RSS of a plugin with CDI specs
on (``--device-list-strategy cdi-annotations``), and a mixed-MIG node
(``--mig-machine``, default a100-mig, ``--mig-strategy mixed``: one server, socket and registration per
resource) with the metrics endpoint on: start -> every resource registered, the metrics page's size,
and the plugin's RSS.

Times of "applied" come from the emulator's watch stream (each event carries the wall-clock time at
which the emulator applied the change). The package's bytecode is compiled first (``compileall``), as
``pip install`` does in an image: with PYTHONDONTWRITEBYTECODE=1 (this environment, and the image) a
checkout without ``__pycache__`` would otherwise compile every module at every start. ``--json`` adds,
as the last line, one object with every figure.
Usage: python bench/node.py [--machine dgx-a100] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import functools
import json
import os
import signal
import statistics
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

import kubegpu
from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.demo.localnode import LocalNode, free_port
from kubegpu.gpu import faults, profiles
from kubegpu.gpu.model import Machine
from kubegpu.kubelet import client

RESOURCE = "nvidia.com/gpu"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_ms(pid: int) -> float:
    """CPU time (ms) the process's live threads have run (``/proc/<pid>/task/*/schedstat``, nanoseconds):
    unlike wall time, it does not grow with what else the machine runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e6


def _next_event(events: Any, kind: str, predicate: Any = lambda e: True) -> dict[str, Any]:
    for event in events:
        if event.get("event") == kind and predicate(event):
            return dict(event)
    raise TimeoutError(f"no {kind} event")


def _summary(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values):.0f}, max {values[-1]:.0f} (n={len(values)})"


def _capacities(status: dict[str, Any]) -> dict[str, int]:
    return {name: r["capacity"] for name, r in status["resources"].items() if r["capacity"]}


def _all_allocatable(expected: dict[str, int]) -> Callable[[dict[str, Any]], bool]:
    def ready(status: dict[str, Any]) -> bool:
        resources = status["resources"]
        return all(resources.get(name, {}).get("allocatable") == count for name, count in expected.items())

    return ready


def mixed_mig_resources(machine: Machine) -> dict[str, int]:
    """What ``--mig-strategy mixed`` advertises (NVIDIA's naming): each MIG profile, and whole non-MIG GPUs."""
    counts = Counter(
        f"nvidia.com/mig-{m.profile.replace('+', '.')}" for g in machine.gpus if g.mig_enabled for m in g.mig_devices
    )
    whole = sum(1 for g in machine.gpus if not g.mig_enabled)
    if whole:
        counts[RESOURCE] = whole
    return dict(counts)


def start_to_registered(
    node: LocalNode, repeat: int, expected: dict[str, int], cpu: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Plugin spawned -> the emulator applied the last Register of ``expected``'s resources, and SIGTERM ->
    the plugin exited with its sockets removed (ms each); the plugin is stopped. ``cpu`` gets the plugin's
    CPU time when the last registration was seen."""
    samples, exits = [], []
    for _ in range(repeat):
        with client.watch(node.socket_dir, timeout=30) as events:
            next(events)  # snapshot
            spawned = time.time()
            node.start_plugin()
            waiting, last = set(expected), 0.0
            for event in events:
                if event.get("event") == "registered" and event.get("resource") in waiting:
                    waiting.discard(event["resource"])
                    last = event["ts"]
                    if not waiting:
                        break
            else:
                raise TimeoutError(f"the watch ended before {sorted(waiting)} registered")
            if cpu is not None:
                cpu.append(_cpu_ms(node.procs["plugin"].pid))
        samples.append((last - spawned) * 1000)
        node.wait_for(_all_allocatable(expected))
        exits.append(sigterm_to_exit(node))
    return samples, exits


def sigterm_to_exit(node: LocalNode) -> float:
    """SIGTERM -> the plugin process exited (ms); its sockets must be gone by then."""
    proc = node.procs["plugin"]
    sockets = [p for p in node.socket_dir.glob("*.sock") if p.name != constants.KUBELET_SOCKET_NAME]
    killer = threading.Timer(15.0, proc.kill)  # Popen.wait(timeout) polls in steps of up to 50 ms: block instead
    killer.start()
    sent = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    elapsed = (time.perf_counter() - sent) * 1000
    killer.cancel()
    node.stop("plugin")
    if proc.returncode != 0:
        raise SystemExit(f"bench/node.py: the plugin exited {proc.returncode} on SIGTERM:\n{node.log_tail('plugin')}")
    left = [str(p) for p in sockets if p.exists()]
    if left:
        raise SystemExit(f"bench/node.py: the plugin exited and left {left}")
    return elapsed


def reregistration(node: LocalNode, repeat: int) -> tuple[list[float], list[float]]:
    """Re-registration times (ms): measured ones, and upper bounds kept apart (registered before the watch began,
    by an emulator that does not report when)."""
    samples, upper_bounds = [], []
    for _ in range(repeat):
        node.stop("kubelet")
        node.start_kubelet()
        created = os.stat(node.socket_dir / constants.KUBELET_SOCKET_NAME).st_ctime
        with client.watch(node.socket_dir, timeout=30) as events:
            snapshot = next(events)
            resource = snapshot["status"]["resources"].get(RESOURCE, {})
            endpoint = resource.get("endpoint") or {}
            registered = resource.get("registrations", 0) > 0 and not endpoint.get("stopped", True)
            if registered:
                # Registered before the watch began: the endpoint says when (wall clock), else only "before now".
                at = endpoint.get("registered_at")
                if at is None:
                    upper_bounds.append((time.time() - created) * 1000)
                else:
                    samples.append((at - created) * 1000)
                continue
            ts = _next_event(events, "registered")["ts"]
        samples.append((ts - created) * 1000)
    return samples, upper_bounds


def fault_to_unhealthy(node: LocalNode, repeat: int, uuids: list[str]) -> list[float]:
    samples = []
    for i in range(repeat):
        gpu = i % len(uuids)
        with client.watch(node.socket_dir, timeout=30) as events:
            next(events)
            written = time.time()
            node.inject(faults.Fault(kind="xid", gpu=gpu, xid=79))
            seen = _next_event(events, "devices", lambda e, u=uuids[gpu]: u in e.get("unhealthy", []))
            samples.append((seen["ts"] - written) * 1000)
            node.inject(faults.Fault(kind="recover", gpu=gpu))
            _next_event(events, "devices", lambda e, u=uuids[gpu]: u not in e.get("unhealthy", []))
    return samples


def _latency(call: Callable[[], object], calls: int) -> tuple[float, float, float]:
    """p50, p99 and max (ms) of ``calls`` calls, after 50 that warm up the channel and the server."""
    for _ in range(50):
        call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.99) - 1)], times[-1]


def rpc_latencies(node: LocalNode, uuids: list[str], calls: int) -> dict[str, float]:
    """Allocate of 1 and 8 GPUs, then GetPreferredAllocation of 4 out of 8, as the kubelet calls them."""
    sock = node.socket_dir / "nvidia-gpu.sock"
    figures: dict[str, float] = {}
    target = "[target p50 <= 0.5, p99 <= 1.2, max <= 3]"
    with grpc.insecure_channel(constants.unix_target(sock)) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        for size in (1, min(8, len(uuids))):
            allocate = api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=uuids[:size])]
            )
            p50, p99, top = _latency(functools.partial(stub.Allocate, allocate, timeout=10), calls)
            print(f"Allocate {size} GPU(s) p50/p99/max (ms): {p50:.2f} / {p99:.2f} / {top:.2f}  {target}")
            key = "allocate" if size == 1 else f"allocate_{size}"
            figures.update({f"{key}_p50_ms": p50, f"{key}_p99_ms": p99, f"{key}_max_ms": top})
        available = uuids[:8]
        size = len(available) // 2
        preferred = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=available, allocation_size=size)
            ]
        )
        p50, p99, top = _latency(functools.partial(stub.GetPreferredAllocation, preferred, timeout=10), calls)
        what = f"GetPreferredAllocation {size} of {len(available)}"
        print(f"{what} p50/p99/max (ms): {p50:.2f} / {p99:.2f} / {top:.2f}  {target}")
        figures.update({"preferred_p50_ms": p50, "preferred_p99_ms": p99, "preferred_max_ms": top})
    return figures


def mixed_mig(machine_name: str, repeat: int) -> dict[str, float]:
    """A mixed-MIG node with ``--metrics-listen``: start -> every resource registered, metrics page, RSS."""
    expected = mixed_mig_resources(profiles.load(machine_name))
    port = free_port()
    plugin_args = ["--mig-strategy", "mixed", "--metrics-listen", f"127.0.0.1:{port}"]
    with LocalNode(machine=machine_name, plugin_args=plugin_args) as node:
        node.start_kubelet()
        start, _ = start_to_registered(node, repeat, expected)
        what = f"{machine_name} --mig-strategy mixed ({len(expected)} resources, metrics on)"
        print(f"{what}: start -> every resource registered (ms): {_summary(start)}  [target <= 1000]")
        node.start_plugin()
        status = node.wait_for(_all_allocatable(expected))
        if _capacities(status) != expected:
            raise SystemExit(f"bench/node.py: {machine_name} advertised {_capacities(status)}, expected {expected}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            lines = response.read().decode().count("\n")
        print(f"{what}: metrics page lines: {lines}")
        rss = _rss_mib(node.procs["plugin"].pid)
        print(f"{what}: plugin RSS (MiB): {rss:.1f}  [target <= 47]")
    return {"mig_start_to_registered_ms": statistics.median(start), "mig_metrics_rss_mib": rss}


def cdi_rss(machine_name: str, expected: dict[str, int]) -> float:
    """The plugin's RSS (MiB) once registered with CDI specs written (``--device-list-strategy cdi-annotations``)."""
    with LocalNode(machine=machine_name) as node:
        spec_dir = node.root / "cdi"
        node.plugin_args = ["--device-list-strategy", "cdi-annotations", "--cdi-spec-dir", str(spec_dir)]
        node.start_kubelet()
        node.start_plugin()
        node.wait_for(_all_allocatable(expected))
        if not list(spec_dir.glob("*.json")):
            raise SystemExit(f"bench/node.py: no CDI spec written in {spec_dir}")
        return _rss_mib(node.procs["plugin"].pid)


def compile_package() -> None:
    """Write the package's bytecode, as installing the wheel does (PYTHONDONTWRITEBYTECODE stops the import system)."""
    compileall.compile_dir(Path(kubegpu.__file__).parent, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="dgx-a100")
    parser.add_argument("--mig-machine", default="a100-mig", help="machine of the mixed-MIG figures ('' skips them)")
    parser.add_argument("--repeat", type=int, default=5, help="samples of the start/re-registration figures")
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000, help="calls per Allocate size and GetPreferredAllocation")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object, last")
    args = parser.parse_args()
    compile_package()
    machine = profiles.load(args.machine)
    uuids = [g.uuid for g in machine.gpus]
    load_start = os.getloadavg()[0]
    print(f"node bench: {args.machine}, {len(uuids)} GPUs, load average {load_start:.1f}")
    figures: dict[str, Any] = {"machine": args.machine, "load_average_start": load_start}
    with LocalNode(machine=args.machine) as node:
        node.start_kubelet()
        start_cpu: list[float] = []
        start, exits = start_to_registered(node, args.repeat, {RESOURCE: len(uuids)}, start_cpu)
        print(f"start -> registered (ms): {_summary(start)}  [target <= 150]")
        print(f"plugin CPU time when registered (ms): {_summary(start_cpu)}  [wall time on a quiet machine]")
        print(f"SIGTERM -> exit, sockets removed (ms): {_summary(exits)}  [target <= 50]")
        node.start_plugin()
        node.wait_for(_all_allocatable({RESOURCE: len(uuids)}))
        pid = node.procs["plugin"].pid
        rss_registered = _rss_mib(pid)
        print(f"plugin RSS after registering (MiB): {rss_registered:.1f}  [target <= 42]")
        rereg, bounds = reregistration(node, args.repeat)
        measured = _summary(rereg) if rereg else "none measured"
        apart = f"; {len(bounds)} upper bounds apart, max {max(bounds):.0f}" if bounds else ""
        print(f"kubelet.sock re-created -> re-registered (ms): {measured}{apart}  [target <= 50]")
        unhealthy = fault_to_unhealthy(node, args.faults, uuids)
        print(f"fault -> kubelet sees Unhealthy (ms): {_summary(unhealthy)}  [target <= 20]")
        figures.update(rpc_latencies(node, uuids, args.calls))
        rss = _rss_mib(pid)
        threads = len(os.listdir(f"/proc/{pid}/task"))
        print(f"plugin RSS after the calls (MiB): {rss:.1f}; threads: {threads}")
        node.stop("plugin", signal.SIGTERM)
    figures.update(
        {
            "start_to_registered_ms": statistics.median(start),
            "start_to_registered_max_ms": max(start),
            "start_cpu_ms": statistics.median(start_cpu),
            "sigterm_exit_ms": statistics.median(exits),
            "sigterm_exit_max_ms": max(exits),
            "rss_mib": rss_registered,
            "rss_after_calls_mib": rss,
            "threads": threads,
            "reregistered_ms": statistics.median(rereg) if rereg else None,
            "fault_to_unhealthy_ms": statistics.median(unhealthy),
            "fault_to_unhealthy_max_ms": max(unhealthy),
        }
    )
    rss_cdi = cdi_rss(args.machine, {RESOURCE: len(uuids)})
    print(f"plugin RSS after registering, CDI specs on (MiB): {rss_cdi:.1f}  [target <= {rss_registered + 5:.1f}]")
    figures["rss_cdi_mib"] = rss_cdi
    if args.mig_machine:
        figures.update(mixed_mig(args.mig_machine, args.repeat))
    figures["load_average_end"] = os.getloadavg()[0]
    print(f"load average at the end {figures['load_average_end']:.1f}")
    if args.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}, sort_keys=True))


if __name__ == "__main__":
    main()
