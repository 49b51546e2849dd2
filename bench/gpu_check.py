"""GPU check: ``kubegpu plugin`` on the NVML backend against ``kubegpu kubelet``, on this machine's GPUs.

For a machine with an NVIDIA GPU (run it when one is lent; nothing in CI depends on it). It prints the
inventory NVML gives, starts the kubelet emulator and the device plugin (no ``--machine``: NVML) as real
processes in a temp dir (``kubegpu.demo.localnode.LocalNode``), admits a 1-GPU pod and prints its runtime
options, samples telemetry, and prints figures as plain lines: start -> registered time, Allocate
p50/p99/max of 1 and 8 GPUs and GetPreferredAllocation (direct gRPC to the plugin socket), plugin RSS and
threads, SIGTERM -> exit with the socket removed. The package's bytecode is compiled first, as installing
the wheel does. ``--json`` prints every figure as one JSON object, last (the fields of bench/node.py).
Needs no network and finishes well inside 5 minutes.

``--fake-profile NAME`` runs the same check on the fake libnvidia-ml.so.1 of the test tree (built with the
system C compiler) showing a shipped profile, and adds the XID -> Unhealthy latency (the fake can inject XIDs).
Without a GPU and without ``--fake-profile`` it exits 1 with one line saying why.

    python bench/gpu_check.py [--fake-profile dgx-a100] [--allocations 1000] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kubegpu.demo.localnode import LocalNode

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 60.0
#: Every figure printed, for ``--json``.
FIGURES: dict[str, object] = {}


def line(what: str, value: object) -> None:
    print(f"gpu_check {what} {value}", flush=True)
    key = what.replace(" ", "_")
    try:
        FIGURES[key] = float(str(value))
    except ValueError:
        FIGURES[key] = value


def rss_mib(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Watcher:
    """The emulator's state-change events, read in a thread: (event, time received)."""

    def __init__(self, socket_dir: Path) -> None:
        from kubegpu.kubelet import client

        self._client = client
        self.socket_dir = socket_dir
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        with self._client.watch(self.socket_dir) as stream:
            for event in stream:
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()

    def first(self, match: Any, since: int = 0, timeout: float = DEADLINE_S) -> tuple[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(since, len(self.events)):
                    if match(self.events[i]):
                        return i, self.events[i]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching emulator event in {timeout:g} s; last: {self.events[-3:]}")
                self._cond.wait(left)


def rpc_latencies(socket: Path, device_ids: list[str], count: int) -> dict[str, list[float]]:
    """Allocate of 1 GPU (cycling through them) and of 8, and GetPreferredAllocation 4 of 8 (ms each call)."""
    import grpc

    from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

    def allocate(ids: list[str]) -> Any:
        return api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)])

    eight = device_ids[:8]
    preferred = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=eight, allocation_size=len(eight) // 2)
        ]
    )
    out: dict[str, list[float]] = {"allocate": [], f"allocate_{len(eight)}": [], "preferred": []}
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        for _ in range(50):  # warm the channel and the server up
            stub.Allocate(allocate(device_ids[:1]), timeout=10)
        calls: list[tuple[str, Any, Any]] = [
            ("allocate", stub.Allocate, None),
            (f"allocate_{len(eight)}", stub.Allocate, allocate(eight)),
            ("preferred", stub.GetPreferredAllocation, preferred),
        ]
        for key, rpc, request in calls:
            for i in range(count):
                body = request if request is not None else allocate([device_ids[i % len(device_ids)]])
                started = time.perf_counter()
                rpc(body, timeout=10)
                out[key].append((time.perf_counter() - started) * 1000)
    return out


def sigterm_to_exit(node: LocalNode) -> float:
    """SIGTERM -> the plugin exited 0 with its socket removed (ms)."""
    proc = node.procs["plugin"]
    killer = threading.Timer(DEADLINE_S, proc.kill)  # Popen.wait(timeout) polls in steps of up to 50 ms: block instead
    killer.start()
    sent = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    elapsed = (time.perf_counter() - sent) * 1000
    killer.cancel()
    node.procs.pop("plugin")
    if proc.returncode != 0 or (node.socket_dir / "nvidia-gpu.sock").exists():
        raise SystemExit(f"gpu_check: the plugin exited {proc.returncode} on SIGTERM, socket left or not")
    return elapsed


def fake_setup(profile: str, work: Path) -> tuple[dict[str, str], str]:
    """Stage the fake library showing ``profile``; returns the environment and the driver root to use."""
    sys.path.insert(0, str(REPO))
    from tests.fake_nvml import harness

    try:
        node = harness.stage(work / "fake", profile)
    except harness.NoCompiler as exc:
        raise SystemExit(f"gpu_check: {exc}") from None
    env = {**node.env, "KUBEGPU_SYSFS_ROOT": str(node.sysfs_root), "LD_LIBRARY_PATH": str(node.library_dir)}
    return env, str(node.driver_root)


def cpu_ms(pid: int) -> float:
    """CPU time (ms) run by the process's live threads (``/proc/<pid>/task/*/schedstat``, nanoseconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue
    return total / 1e6


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/gpu_check.py", description=__doc__.splitlines()[0])
    parser.add_argument("--fake-profile", metavar="NAME", help="use the fake libnvidia-ml.so.1 showing this profile")
    parser.add_argument("--allocations", type=int, default=1000, help="calls of each RPC to time (default 1000)")
    parser.add_argument("--xids", type=int, default=5, help="XIDs injected for the latency figure (fake only)")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object, last")
    args = parser.parse_args(argv)
    started = time.monotonic()
    import kubegpu

    compileall.compile_dir(Path(kubegpu.__file__).parent, quiet=1)  # as installing the wheel does

    work = Path(tempfile.mkdtemp(prefix="kg-check-", dir="/tmp"))  # short: the node's sockets live in it
    node: LocalNode | None = None
    try:
        extra_env, driver_root = fake_setup(args.fake_profile, work) if args.fake_profile else ({}, "/")
        os.environ.update({k: v for k, v in extra_env.items() if k != "LD_LIBRARY_PATH"})
        env = {**os.environ, **extra_env}

        from kubegpu.gpu import errors
        from kubegpu.gpu.nvml import NvmlBackend

        backend = NvmlBackend(driver_root=driver_root)
        try:
            machine = backend.discover()
        except errors.NvmlUnavailable as exc:
            print(f"gpu_check: no usable NVIDIA GPU on this machine: {exc}", file=sys.stderr)
            return 1
        line("library", backend.library_path)
        inventory = subprocess.run(
            [sys.executable, "-m", "kubegpu.gpu.nvml", "--driver-root", driver_root],
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        print(inventory.stdout, end="")
        line("gpus", len(machine.gpus))

        node = LocalNode(machine=None, root=work, env=env)  # no machine: the plugin reads NVML
        node.start_kubelet(timeout=DEADLINE_S)
        watcher = Watcher(node.socket_dir)
        watcher.first(lambda e: True)  # the snapshot: the watch is live
        t0 = time.time()
        plugin = node.start_plugin()
        i, registered = watcher.first(lambda e: e.get("event") == "registered")
        _, advertised = watcher.first(
            lambda e: e.get("event") == "devices" and len(e.get("healthy", [])) == len(machine.gpus), since=i
        )
        line("start_to_registered_s", f"{registered['ts'] - t0:.3f}")
        line("start_to_devices_advertised_s", f"{advertised['ts'] - t0:.3f}")
        line("start_to_registered_ms", f"{(advertised['ts'] - t0) * 1000:.0f}")
        line("start_cpu_ms", f"{cpu_ms(plugin.pid):.0f}")  # the start's cost, whatever else the machine runs
        line("plugin_rss_mib_registered", f"{rss_mib(plugin.pid):.1f}")
        line("rss_mib", f"{rss_mib(plugin.pid):.1f}")

        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gpu-check", "namespace": "default"},
            "spec": {"containers": [{"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        }
        admitted = node.admit(pod)
        print("runtime options of the admitted 1-GPU pod:")
        print(json.dumps(admitted, indent=2, sort_keys=True))

        latencies = rpc_latencies(node.socket_dir / "nvidia-gpu.sock", [g.uuid for g in machine.gpus], args.allocations)
        line("allocate_calls", len(latencies["allocate"]))
        for key, values in latencies.items():
            line(f"{key}_p50_ms", f"{statistics.median(values):.2f}")
            line(f"{key}_p99_ms", f"{percentile(values, 0.99):.2f}")
            line(f"{key}_max_ms", f"{max(values):.2f}")
        line("plugin_rss_mib_after_allocate", f"{rss_mib(plugin.pid):.1f}")
        line("plugin_threads", len(os.listdir(f"/proc/{plugin.pid}/task")))

        sample_started = time.perf_counter()
        sample = backend.sample()
        line("sample_ms", f"{(time.perf_counter() - sample_started) * 1000:.1f}")
        for gpu in sample.gpus:
            line(
                f"telemetry gpu{gpu.index}",
                f"available={gpu.available} util%={gpu.gpu_util_pct} fb_used_mib={gpu.fb_used_mib} "
                f"fb_total_mib={gpu.fb_total_mib} temp_c={gpu.gpu_temp_c} power_w={gpu.power_w} "
                f"sm_mhz={gpu.sm_clock_mhz} energy_mj={gpu.total_energy_mj} ecc_dbe={gpu.ecc_dbe_volatile_total} "
                f"xid_last={gpu.xid_last} mig_devices={len(gpu.mig)}",
            )

        if args.fake_profile:
            from tests.fake_nvml import harness

            fake = harness.FakeNode(
                root=work / "fake",
                machine=machine,
                driver_root=Path(driver_root),
                sysfs_root=Path(extra_env["KUBEGPU_SYSFS_ROOT"]),
                control=Path(extra_env["KUBEGPU_FAKE_NVML_CONTROL"]),
                profile_json=Path(extra_env["KUBEGPU_FAKE_NVML_PROFILE"]),
            )
            delays = []
            since = len(watcher.events)
            for n in range(min(args.xids, len(machine.gpus))):
                uuid = machine.gpus[n].uuid
                injected = time.time()
                fake.xid(n, 79)
                since, event = watcher.first(
                    lambda e, u=uuid: e.get("event") == "devices" and u in e.get("unhealthy", []), since=since
                )
                delays.append((event["ts"] - injected) * 1000)
            line("xid79_to_unhealthy_ms", " ".join(f"{d:.1f}" for d in delays))
            line("xid79_to_unhealthy_max_ms", f"{max(delays):.1f}")
        backend.close()
        line("sigterm_exit_ms", f"{sigterm_to_exit(node):.1f}")
        line("total_s", f"{time.monotonic() - started:.1f}")
        if args.json:
            print(json.dumps(FIGURES, sort_keys=True))
        return 0
    finally:
        if node is not None:
            node.close()  # stops the processes and removes ``work``
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
