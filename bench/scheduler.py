"""Live scheduler speed: (a) the scheduling loop without an API, (b) end to end through an API server.

(a) 1,000 and 5,000 nodes of 8 GPUs (dgx-a100-like: 128 CPUs, 1 TiB), a stream of pods shaped like the Alibaba
    GPU trace (the built-in table of its pod shapes; a fractional pod asks one whole ``nvidia.com/gpu``, as it
    would through the device plugin), the tutorial's ``gpu-scheduler`` profile. Pods leave in arrival order once
    about 70 % of the GPUs are requested, so the cluster stays busy. Reports decisions/s and p50/p99 latency of one
    decision (filter + score + select + GPU choice + assume in the cache) and the process RSS.
(b) ``kubegpu scheduler`` as a separate process against the in-process API server (tests/kubeapi), or a real one
    with ``--kubeconfig``: 500 Ready nodes, a backlog of 2,000 one-GPU pods drained (pods bound/s from the
    scheduler's /readyz to the last binding seen), then 300 pods created at 50/s while it runs (watch event of
    the new pod to watch event of its binding, p50/p99, as seen by this script's watch).

    python bench/scheduler.py                  # both parts
    python bench/scheduler.py --json | tail -n 1
    python bench/scheduler.py --skip-api       # only (a)
    python bench/scheduler.py --kubeconfig ~/.kube/config   # (b) against a real API server (cleans up after)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from kubegpu.scheduling.live import resources
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.config import default_config
from kubegpu.scheduling.live.cycle import Cycle, Placement
from kubegpu.scheduling.live.objects import NodeInfo, PodInfo
from kubegpu.scheduling.simulate.synthetic import synthetic_pods

ROOT = Path(__file__).resolve().parents[1]
GI = 1024**3
STREAM_RATE = 50  # pods/s created in part (b)'s latency phase


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def trace_pods(count: int, seed: int) -> list[PodInfo]:
    shapes = synthetic_pods(1.0)
    rng = np.random.default_rng(seed)
    out = []
    for i, k in enumerate(rng.integers(len(shapes), size=count)):
        s = shapes[int(k)]
        requests = {resources.CPU: max(1, s.cpu_milli), resources.MEMORY: max(1, s.memory_mib) * 1024 * 1024}
        if s.num_gpu:
            requests[resources.GPU] = s.num_gpu
        out.append(
            PodInfo(
                uid=f"u{i}",
                namespace="bench",
                name=f"p{i}",
                requests=requests,
                non_zero={resources.CPU: requests[resources.CPU], resources.MEMORY: requests[resources.MEMORY]},
                scheduler_name="gpu-scheduler",
                created=float(i),
            )
        )
    return out


def loop_bench(nodes: int, decisions: int, seed: int) -> dict[str, float]:
    cache = SchedulerCache()
    allocatable = {"cpu": 128000, "memory": 1024 * GI, "pods": 110, "nvidia.com/gpu": 8}
    for i in range(nodes):
        cache.set_node(
            NodeInfo(f"node-{i:05d}", dict(allocatable), {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
        )
    profile = default_config().profiles[0]
    cycle = Cycle(np.random.default_rng(seed))
    pods = trace_pods(decisions, seed)
    capacity = nodes * 8
    live: list[PodInfo] = []
    used = 0
    latencies: list[float] = []
    failed = 0
    start = time.perf_counter()
    for pod in pods:
        while used > 0.7 * capacity and live:
            gone = live.pop(0)
            cache.remove_pod(gone.uid)
            used -= gone.gpus
        t0 = time.perf_counter()
        decision = cycle.schedule(cache, profile, pod)
        if isinstance(decision, Placement):
            cache.add_pod(pod, decision.node, decision.gpus, assumed=True)
        latencies.append(time.perf_counter() - t0)
        if isinstance(decision, Placement):
            live.append(pod)
            used += pod.gpus
        else:
            failed += 1
    wall = time.perf_counter() - start
    return {
        "nodes": nodes,
        "decisions": decisions,
        "decisions_per_s": decisions / sum(latencies),
        "p50_ms": pct(latencies, 50) * 1000,
        "p99_ms": pct(latencies, 99) * 1000,
        "unschedulable": failed,
        "wall_s": wall,
        "rss_mib": rss_mib(),
    }


# --- (b) through an API server ---------------------------------------------------------------------------------


def _node_body(name: str, prefix: str) -> dict[str, Any]:
    allocatable = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench",
             "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubegpu.io/bench": prefix}},
        "status": {"capacity": allocatable, "allocatable": allocatable, "conditions": [ready]},
    }


def _pod_body(name: str, scheduler: str, prefix: str) -> dict[str, Any]:
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"kubegpu.io/bench": prefix},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": res, "limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }


def api_bench(kubeconfig: Path, nodes: int, backlog: int, stream: int) -> dict[str, float]:
    from lightkube import ApiError, Client, KubeConfig
    from lightkube.resources.core_v1 import Namespace, Node, Pod

    client = Client(config=KubeConfig.from_file(kubeconfig))
    prefix = f"kgb-{uuid.uuid4().hex[:6]}"
    namespace, scheduler = prefix, f"{prefix}-sched"
    client.create(Namespace.from_dict({"metadata": {"name": namespace}}))
    names = [f"{prefix}-n{i:04d}" for i in range(nodes)]
    seen_added: dict[str, float] = {}
    seen_bound: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        watcher = Client(config=KubeConfig.from_file(kubeconfig))
        for kind, pod in watcher.watch(Pod, namespace=namespace):
            now = time.perf_counter()
            name = pod.metadata.name  # type: ignore[union-attr]
            if kind == "ADDED":
                seen_added.setdefault(name, now)
            if pod.spec is not None and pod.spec.nodeName:
                seen_bound.setdefault(name, now)
            if stop.is_set():
                return

    proc = None
    try:
        for name in names:
            body = _node_body(name, prefix)
            client.create(Node.from_dict(body))
            client.patch(Node.Status, name, {"status": body["status"]})
        threading.Thread(target=watch, daemon=True).start()
        for i in range(backlog):
            client.create(Pod.from_dict(_pod_body(f"b{i:05d}", scheduler, prefix)), namespace=namespace)
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "config.yaml"
            config.write_text(
                json.dumps(
                    {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": scheduler}],
                    }
                )
            )
            log = open(Path(tmp) / "scheduler.log", "wb")  # noqa: SIM115 (lives as long as the process)
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubegpu.cli", "scheduler", "--kubeconfig", str(kubeconfig),
                 "--config", str(config), "--leader-elect=false", "--metrics-listen", "127.0.0.1:0"],
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
            )  # fmt: skip
            port = _port(Path(tmp) / "scheduler.log")
            _wait(lambda: _ready(port), 120, "scheduler ready")
            t0 = time.perf_counter()
            _wait(lambda: sum(1 for n in list(seen_bound) if n.startswith("b")) >= backlog, 600, "backlog bound")
            drained = max(v for n, v in list(seen_bound.items()) if n.startswith("b")) - t0
            for i in range(stream):
                client.create(Pod.from_dict(_pod_body(f"s{i:05d}", scheduler, prefix)), namespace=namespace)
                time.sleep(1 / STREAM_RATE)  # pacing: latency of a pod arriving at a scheduler with no backlog
            try:
                _wait(lambda: sum(1 for n in list(seen_bound) if n.startswith("s")) >= stream, 120, "stream bound")
            except SystemExit:
                got = sum(1 for n in list(seen_bound) if n.startswith("s"))
                print(f"stream: {got}/{stream} bound; scheduler log tail:", file=sys.stderr)
                print((Path(tmp) / "scheduler.log").read_text()[-4000:], file=sys.stderr)
                raise
            lat = [seen_bound[n] - seen_added[n] for n in list(seen_bound) if n.startswith("s") and n in seen_added]
            proc.terminate()
            proc.wait(30)
            log.close()
    finally:
        stop.set()
        if proc is not None and proc.poll() is None:
            proc.kill()
        client.delete(Namespace, namespace)
        for name in names:
            with contextlib.suppress(ApiError):  # clean-up is best effort
                client.delete(Node, name)
    return {
        "api_nodes": nodes,
        "api_pods": backlog,
        "api_pods_per_s": backlog / drained,
        "api_event_to_bind_p50_ms": pct(lat, 50) * 1000,
        "api_event_to_bind_p99_ms": pct(lat, 99) * 1000,
    }


def _port(log: Path) -> int:
    def found() -> int:
        for line in log.read_text(errors="replace").splitlines():
            if "scheduler started" in line and "metrics_port=" in line:
                return int(line.split("metrics_port=")[1].split()[0])
        return 0

    return _wait(found, 60, "scheduler start line")


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _wait(check: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {what} not reached within {within} s")
        time.sleep(0.05)  # poll interval


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON object of all figures")
    parser.add_argument("--nodes", default="1000,5000", help="cluster sizes for part (a)")
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-api", action="store_true", help="skip part (b)")
    parser.add_argument("--kubeconfig", help="run part (b) against this API server instead of the in-process one")
    parser.add_argument("--api-nodes", type=int, default=500)
    parser.add_argument("--api-pods", type=int, default=2000)
    parser.add_argument("--api-stream", type=int, default=300)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    for n in (int(x) for x in args.nodes.split(",")):
        r = loop_bench(n, args.decisions, args.seed)
        print(
            f"(a) {n} nodes x 8 GPUs, {args.decisions} trace-shaped pods: {r['decisions_per_s']:.0f} decisions/s, "
            f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, {r['unschedulable']} unschedulable, "
            f"RSS {r['rss_mib']:.0f} MiB"
        )
        figures[f"nodes_{n}"] = r
        figures.update(nodes=n, decisions_per_s=r["decisions_per_s"], p50_ms=r["p50_ms"], p99_ms=r["p99_ms"])
    figures["rss_mib"] = rss_mib()
    if not args.skip_api:
        if args.kubeconfig:
            b = api_bench(Path(args.kubeconfig), args.api_nodes, args.api_pods, args.api_stream)
        else:
            sys.path.insert(0, str(ROOT))
            from tests.kubeapi import KubeApiServer

            with KubeApiServer() as server:
                b = api_bench(server.kubeconfig, args.api_nodes, args.api_pods, args.api_stream)
        print(
            f"(b) {b['api_nodes']} nodes, {b['api_pods']} pending pods drained at {b['api_pods_per_s']:.0f} pods/s; "
            f"watch event -> bind p50 {b['api_event_to_bind_p50_ms']:.0f} ms, "
            f"p99 {b['api_event_to_bind_p99_ms']:.0f} ms ({args.api_stream} pods created at {STREAM_RATE}/s)"
        )
        figures.update(b)
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
