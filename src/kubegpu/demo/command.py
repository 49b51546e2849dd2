"""``kubegpu demo``: the whole node story in about four seconds on a simulated machine.

Owns the script of the demo: start the kubelet emulator, the device plugin and
the exporter as real processes (real gRPC over unix sockets in a temp dir),
show capacity, admit pods asking 1, 2 and 4 GPUs, inject XID 79 on an allocated
GPU and show allocatable drop while the pod keeps its GPU, recover it, show
exporter lines carrying pod labels, restart the emulator and show the plugin
re-registering and the allocations restored from the checkpoint, then stop
everything and leave nothing behind. Every step is also a check; the summary
says whether all held. Must not reach into the processes' internals: it uses
only their public interfaces (control API, fault journal, /metrics).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from kubegpu.demo.localnode import LocalNode, NodeError, pod_manifest
from kubegpu.demo.reporter import Reporter
from kubegpu.gpu import errors as gpu_errors
from kubegpu.gpu import faults, profiles
from kubegpu.gpu.model import Machine

RESOURCE = "nvidia.com/gpu"


def _resource(status: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, dict[str, Any]] = status.get("resources", {})
    return resources.get(RESOURCE, {"capacity": 0, "allocatable": 0, "devices": []})


def _pod_devices(status: dict[str, Any], name: str) -> list[str]:
    for pod in status.get("pods", []):
        if pod["name"] == name:
            return [d for container in pod["containers"].values() for d in container.get(RESOURCE, [])]
    return []


def _short(ids: list[str]) -> str:
    """``GPU-70542ca2…,GPU-f23c0d14…``: enough of each UUID to tell them apart in a table."""
    return ",".join(i[:12] + "…" for i in ids)


def _has(capacity: int, allocatable: int) -> Callable[[dict[str, Any]], bool]:
    def predicate(status: dict[str, Any]) -> bool:
        r = _resource(status)
        return bool(r["capacity"] == capacity and r["allocatable"] == allocatable)

    return predicate


def _capacity_table(out: Reporter, status: dict[str, Any], machine: Machine, title: str) -> None:
    r = _resource(status)
    index = {g.uuid: g.index for g in machine.gpus}
    rows = [
        [str(index.get(d["id"], "?")), d["id"], d["health"], ",".join(str(n) for n in d.get("numa", []))]
        for d in sorted(r["devices"], key=lambda d: index.get(d["id"], 99))
    ]
    out.table(
        f"{title}: {RESOURCE} capacity {r['capacity']}, allocatable {r['allocatable']}",
        ["GPU", "device ID", "health", "NUMA"],
        rows,
    )
    out.emit("capacity", capacity=r["capacity"], allocatable=r["allocatable"], devices=r["devices"])


def _run(node: LocalNode, machine: Machine, out: Reporter) -> None:
    gpus = len(machine.gpus)
    index = {g.uuid: g.index for g in machine.gpus}

    out.step(f"1. A simulated {machine.name} node: {machine.description}")
    node.start_kubelet()
    out.emit("started", f"kubelet emulator up  (socket dir {node.socket_dir})", process="kubelet")
    node.start_plugin()
    status = node.wait_for(_has(gpus, gpus))
    out.emit("started", "device plugin registered nvidia.com/gpu over real gRPC", process="plugin")
    node.start_exporter()
    out.emit("started", f"exporter serving http://127.0.0.1:{node.exporter_port}/metrics", process="exporter")
    _capacity_table(out, status, machine, "Node")
    out.check("plugin registers every GPU", _resource(status)["capacity"] == gpus, f"{gpus} GPUs")

    out.step("2. Admit pods asking 1, 2 and 4 GPUs")
    rows = []
    held: dict[str, list[str]] = {}
    for name, count in (("infer", 1), ("finetune", 2), ("train", 4)):
        result = node.admit(pod_manifest(name, count))
        env = result["containers"]["main"]["envs"].get("NVIDIA_VISIBLE_DEVICES", "")
        ids = [i for i in env.split(",") if i]
        held[name] = ids
        rows.append([f"demo/{name}", str(count), ", ".join(str(index.get(i, i)) for i in ids), _short(ids)])
        out.emit("admitted", pod=f"demo/{name}", gpus=count, containers=result["containers"])
    out.table(
        "What each container gets (runtime options from Allocate)",
        ["pod", "asked", "GPU indices", "NVIDIA_VISIBLE_DEVICES"],
        rows,
    )
    all_ids = [i for ids in held.values() for i in ids]
    out.check(
        "each container gets distinct GPUs of this machine",
        len(all_ids) == len(set(all_ids)) == 7 and all(i in index for i in all_ids),
        f"{len(set(all_ids))} distinct UUIDs",
    )

    out.step("3. Metrics carry pod labels (dcgm-exporter names, pod-resources API)")
    from kubegpu.monitoring import excerpt

    lines: list[str] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = excerpt.pod_lines(node.http_get("/metrics"))
        if len({ln for ln in lines}) >= 7:
            break
        time.sleep(0.2)
    for line in lines[:4]:
        out.emit("metric", f"  {line}", line=line)
    out.check("exporter labels the 7 allocated GPUs with their pods", len(lines) >= 7, f"{len(lines)} series")

    victim = held["finetune"][0]
    gpu = index[victim]
    out.step(f"4. XID 79 (GPU fallen off the bus) on GPU {gpu}, held by demo/finetune")
    injected = time.monotonic()
    node.inject(faults.Fault(kind="xid", gpu=gpu, xid=79))
    status = node.wait_for(_has(gpus, gpus - 1))
    seen_ms = (time.monotonic() - injected) * 1000
    out.emit("fault", f"kubelet saw GPU {gpu} Unhealthy after {seen_ms:.0f} ms", gpu=gpu, xid=79, ms=round(seen_ms))
    _capacity_table(out, status, machine, "After the fault")
    out.check("allocatable drops by one", _resource(status)["allocatable"] == gpus - 1)
    out.check("the pod keeps its GPU", victim in _pod_devices(status, "finetune"))
    deadline = time.monotonic() + 10
    xid_line = ""
    while time.monotonic() < deadline and not xid_line:
        page = node.http_get("/metrics")
        xid_line = next((ln for ln in excerpt.pod_lines(page, "DCGM_FI_DEV_XID_ERRORS") if ln.endswith(" 79")), "")
        time.sleep(0.2)
    if xid_line:
        out.emit("metric", f"  {xid_line}", line=xid_line)
    out.check("the exporter reports the XID on that GPU", bool(xid_line))

    out.step(f"5. Recover GPU {gpu}")
    node.inject(faults.Fault(kind="recover", gpu=gpu))
    status = node.wait_for(_has(gpus, gpus))
    out.emit("recovered", f"GPU {gpu} is Healthy again: allocatable {gpus}", gpu=gpu)
    out.check("allocatable returns after recovery (NVIDIA's plugin needs a restart)", True)

    out.step("6. Restart the kubelet: plugin re-registers, allocations come back from the checkpoint")
    before = {p["name"]: p["containers"] for p in status["pods"]}
    node.stop("kubelet", signal.SIGTERM)
    restarted = time.monotonic()
    node.start_kubelet()
    status = node.status()
    out.emit(
        "restarted",
        f"emulator restarted: capacity {_resource(status)['capacity']} until the plugin registers again",
        capacity=_resource(status)["capacity"],
    )
    status = node.wait_for(_has(gpus, gpus))
    out.emit(
        "reregistered",
        f"plugin re-registered {(time.monotonic() - restarted) * 1000:.0f} ms after the restart",
        ms=round((time.monotonic() - restarted) * 1000),
    )
    after = {p["name"]: p["containers"] for p in status["pods"]}
    out.table(
        "Allocations after the restart (from kubelet_internal_checkpoint)",
        ["pod", "GPU indices"],
        [[f"demo/{n}", ", ".join(str(index.get(i, i)) for i in _pod_devices(status, n))] for n in sorted(after)],
    )
    out.check("allocations survive the kubelet restart", after == before)
    again = node.admit(pod_manifest("late", 1))
    late = again["containers"]["main"]["envs"].get("NVIDIA_VISIBLE_DEVICES", "")
    out.check("a new pod gets a free GPU, not one already held", bool(late) and late not in all_ids, late)

    out.step("7. Stop everything")
    codes = {name: node.stop(name) for name in ("exporter", "plugin", "kubelet")}
    out.check("every process exits cleanly", all(code == 0 for code in codes.values()), json.dumps(codes))
    leftovers = [str(p) for p in node.socket_dir.glob("*.sock")]
    out.check("no sockets are left behind", not leftovers, ", ".join(leftovers))


#: The story admits pods asking 1, 2 and 4 whole GPUs, faults one of them and then fits one more: it needs
#: at least 8 GPUs, none in MIG mode (MIG devices are not advertised as nvidia.com/gpu).
MIN_GPUS = 8


def supported_profiles() -> list[str]:
    """The shipped profiles the demo runs on: at least :data:`MIN_GPUS` GPUs, none MIG-enabled."""
    out = []
    for name in profiles.available():
        machine = profiles.load(name)
        if len(machine.gpus) >= MIN_GPUS and not any(g.mig_enabled for g in machine.gpus):
            out.append(name)
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "cluster":
        from kubegpu.demo import cluster

        return cluster.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="kubegpu demo",
        description="A simulated GPU node end to end: kubelet emulator, device plugin and exporter as real "
        "processes talking gRPC over unix sockets in a temp dir. Takes about 4 seconds. "
        "'kubegpu demo cluster --kubeconfig FILE' runs the cluster demo on an API server instead.",
    )
    parser.add_argument(
        "--machine",
        default="dgx-a100",
        help=f"simulated machine profile (default: dgx-a100); one with at least {MIN_GPUS} whole GPUs and no MIG, "
        f"because the story admits 1 + 2 + 4 GPUs and then one more: {', '.join(supported_profiles())}",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line; the last is the summary")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs) for inspection")
    args = parser.parse_args(argv)
    try:
        machine = profiles.load(args.machine)
    except gpu_errors.ProfileError as exc:
        parser.error(str(exc))
    choices = f"(it runs on {', '.join(supported_profiles())})"
    if len(machine.gpus) < MIN_GPUS:
        parser.error(
            f"--machine {args.machine}: the demo needs at least {MIN_GPUS} whole GPUs, it has {len(machine.gpus)} "
            + choices
        )
    if any(g.mig_enabled for g in machine.gpus):
        parser.error(f"--machine {args.machine}: the demo uses whole GPUs; pick a machine without MIG {choices}")

    out = Reporter(as_json=args.json)
    node = LocalNode(machine=args.machine)
    error = ""
    try:
        _run(node, machine, out)
    except (NodeError, TimeoutError, OSError, KeyError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        out.check("the demo ran to the end", False, error)
        if not args.json:
            for name in ("kubelet", "plugin", "exporter"):
                out.console.print(f"[dim]--- {name} log ---\n{node.log_tail(name)}[/]")
    finally:
        root = node.root
        if args.keep:
            for name in list(node.procs):
                node.stop(name)
        else:
            node.close()
    ok = bool(out.checks) and all(c["ok"] for c in out.checks)
    failed = [str(c["check"]) for c in out.checks if not c["ok"]]
    summary: dict[str, Any] = {
        "ok": ok,
        "machine": machine.name,
        "seconds": out.elapsed(),
        "checks": len(out.checks),
        "failed": failed,
    }
    if args.keep:
        summary["dir"] = str(root)
    verdict = "[green]all checks passed[/]" if ok else f"[red]failed: {', '.join(failed)}[/]"
    out.emit("summary", f"\n{verdict} in {out.elapsed():.1f} s", **summary)
    if error and not args.json:
        print(error, file=sys.stderr)
    return 0 if ok else 1
