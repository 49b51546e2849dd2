"""Soak a simulated GPU node: restart the kubelet and the plugin over and over while pods come and go.

`kubegpu kubelet` and `kubegpu plugin` run as real processes. Each round restarts one of them —
even rounds the emulator (SIGTERM, every fourth round SIGKILL: a crash), odd rounds the plugin (SIGHUP:
a full in-process restart, so one plugin process lives through the whole soak and its resources can
be compared at start and end) — then admits and deletes pods and injects and recovers faults.

After every round it checks, against the pods this script admitted and did not delete:
  lost allocations    a live pod whose devices the emulator no longer reports (or reports changed)
  double allocations  a device held by two live containers

and prints, for the plugin process, open file descriptors, threads and RSS at start and end.
Targets (issue 2): zero lost, zero double, no growth in fds and threads.

    python bench/soak.py --restarts 100 [--machine dgx-a100] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubegpu.demo.localnode import LocalNode, pod_manifest
from kubegpu.gpu import faults, profiles
from kubegpu.kubelet import client, errors

RESOURCE = "nvidia.com/gpu"


def _proc_stats(pid: int) -> dict[str, float]:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"fds": fds, "threads": int(fields["Threads"]), "rss_mib": int(fields["VmRSS"].split()[0]) / 1024}


def _reported(status: dict[str, Any]) -> dict[str, list[str]]:
    return {
        f"{p['namespace']}/{p['name']}": sorted(d for c in p["containers"].values() for d in c.get(RESOURCE, []))
        for p in status["pods"]
    }


def _registered(gpus: int) -> Any:
    def predicate(status: dict[str, Any]) -> bool:
        r = status["resources"].get(RESOURCE, {})
        return bool(r.get("capacity") == gpus and r.get("allocatable") == r.get("capacity"))

    return predicate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--restarts", type=int, default=100)
    parser.add_argument("--machine", default="dgx-a100")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    machine = profiles.load(args.machine)
    gpus = len(machine.gpus)
    live: dict[str, list[str]] = {}
    lost = double = rejected = admitted = deleted = 0
    started = time.monotonic()
    with LocalNode(machine=args.machine, plugin_args=["--health-recovery-quiet-period", "0"]) as node:
        node.start_kubelet()
        node.start_plugin()
        node.wait_for(_registered(gpus))
        plugin_pid = node.procs["plugin"].pid
        time.sleep(0.5)
        before = _proc_stats(plugin_pid)
        serial = 0
        for round_ in range(args.restarts):
            if round_ % 2 == 0:
                sig = signal.SIGKILL if round_ % 4 == 0 else signal.SIGTERM
                node.stop("kubelet", sig)
                node.start_kubelet()
            else:
                # Wait for the re-registration itself: the old registration still looks healthy meanwhile.
                with client.watch(node.socket_dir, timeout=30) as events:
                    next(events)
                    os.kill(plugin_pid, signal.SIGHUP)
                    next(e for e in events if e.get("event") == "registered")
            node.wait_for(_registered(gpus), timeout=30)
            # pods come and go: delete some, make room when the node is full, admit one or two
            for _ in range(rng.randint(0, 1)):
                if live:
                    target = rng.choice(sorted(live))
                    node.delete(target)
                    del live[target]
                    deleted += 1
            for _ in range(rng.randint(1, 2)):
                size = rng.choice((1, 1, 2, 4))
                while live and gpus - sum(len(ids) for ids in live.values()) < size:
                    target = rng.choice(sorted(live))
                    node.delete(target)
                    del live[target]
                    deleted += 1
                serial += 1
                name = f"p{serial}"
                try:
                    result = node.admit(pod_manifest(name, size, namespace="soak"))
                except errors.ControlError as exc:
                    rejected += 1
                    print(f"round {round_ + 1}: soak/{name} ({size} GPUs) rejected: {exc}", flush=True)
                    continue
                env = result["containers"]["main"]["envs"].get("NVIDIA_VISIBLE_DEVICES", "")
                live[f"soak/{name}"] = sorted(env.split(","))
                admitted += 1
            # a fault and its recovery on a random GPU
            gpu = rng.randrange(gpus)
            node.inject(faults.Fault(kind="xid", gpu=gpu, xid=rng.choice((48, 79, 94))))
            node.wait_for(lambda s: s["resources"][RESOURCE]["allocatable"] == gpus - 1, timeout=30)
            node.inject(faults.Fault(kind="recover", gpu=gpu))
            status = node.wait_for(_registered(gpus), timeout=30)
            reported = _reported(status)
            lost += sum(1 for pod, ids in live.items() if reported.get(pod) != ids)
            held = Counter(d for ids in reported.values() for d in ids)
            double += sum(1 for count in held.values() if count > 1)
            if (round_ + 1) % 10 == 0:
                print(
                    f"round {round_ + 1}: live pods {len(live)}, admitted {admitted}, deleted {deleted}, "
                    f"rejected {rejected}, lost {lost}, double {double}",
                    flush=True,
                )
        after = _proc_stats(plugin_pid)
        same_plugin = node.running("plugin") and node.procs["plugin"].pid == plugin_pid
    print(f"restarts: {args.restarts} ({(args.restarts + 1) // 2} kubelet, {args.restarts // 2} plugin SIGHUP)")
    print(f"pods admitted {admitted}, deleted {deleted}, rejected although GPUs were free {rejected}  [target 0]")
    print(f"lost allocations: {lost}  [target 0]")
    print(f"double allocations: {double}  [target 0]")
    print(f"plugin process survived the soak: {same_plugin}")
    for key in ("fds", "threads", "rss_mib"):
        print(f"plugin {key}: start {before[key]:g}, end {after[key]:g}")
    print(f"seconds: {time.monotonic() - started:.1f}")


if __name__ == "__main__":
    main()
