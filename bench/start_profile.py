"""Profile the device plugin's start (issue 16): what it imports, the dataclasses it builds, what it costs.

Starts ``kubegpu plugin`` as a real process beside a real ``kubegpu kubelet`` (``LocalNode``), on a
simulated machine or (``--nvml``) on the fake ``libnvidia-ml.so.1`` of ``tests/fake_nvml``, waits until
the emulator lists its GPUs, and stops it with SIGTERM; ``--repeat`` times. Each run has
``PYTHONPROFILEIMPORTTIME`` on (``python -X importtime``) and runs through ``bench/startprobe.py``, which
lists the kubegpu dataclasses built. Prints, as plain lines:

    modules imported              from exec to SIGTERM (the import-time report's entries)
    kubegpu modules / dataclasses loaded and built by then (each dataclass compiles its methods at import)
    plugin CPU when registered    median and min of the runs (/proc/<pid>/task/*/schedstat)
    top cumulative imports        per module the least of the runs (wall time: noisy on a shared machine)

and with ``--instructions`` (needs valgrind) the instructions one start executes from exec to its exit
after SIGTERM (callgrind; the same to ~0.1 % from run to run whatever the machine's load, unlike times).
The package's bytecode is compiled first, as installing the wheel does. ``--json`` adds one object, last.
Usage: python bench/start_profile.py [--machine dgx-a100 | --nvml [--fake-profile dgx-a100]] [--repeat 5]
       [--top 15] [--instructions] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import kubegpu
from kubegpu.demo.localnode import LocalNode

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
RESOURCE = "nvidia.com/gpu"
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)\s*$", re.MULTILINE)


def cpu_ms(pid: int) -> float:
    """CPU time (ms) the process's live threads have run (``/proc/<pid>/task/*/schedstat``, nanoseconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue
    return total / 1e6


def nvml_env(profile: str, work: Path) -> dict[str, str]:
    """The environment of a plugin reading the fake library that shows ``profile``."""
    sys.path.insert(0, str(REPO))
    from tests.fake_nvml import harness

    try:
        fake = harness.stage(work / "fake", profile)
    except harness.NoCompiler as exc:
        raise SystemExit(f"bench/start_profile.py: {exc}") from None
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEGPU_FAKE_NVML") and k != "LD_LIBRARY_PATH"}
    env.update(fake.env, KUBEGPU_SYSFS_ROOT=str(fake.sysfs_root), LD_LIBRARY_PATH=str(fake.library_dir))
    return env


def one_start(machine: str | None, env: dict[str, str], expected: int, callgrind: Path | None = None) -> dict[str, Any]:
    """One start to registered, then SIGTERM: its import report, dataclasses, CPU and (callgrind) instructions."""
    with LocalNode(machine=machine, env=env) as node:
        probe = node.root / "probe.json"
        run_env = {**env, "PYTHONPATH": os.pathsep.join([str(BENCH), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        run_env.update(PYTHONPROFILEIMPORTTIME="1", KUBEGPU_PROBE_OUT=str(probe))
        if callgrind is not None:
            run_env.update(KUBEGPU_PROBE_CALLGRIND=str(callgrind), PYTHONHASHSEED="0")
        node.start_kubelet()
        node.env = run_env
        args = ["plugin", *(["--machine", machine, "--fault-file", str(node.fault_file)] if machine else [])]
        proc = node.spawn("plugin", [*args, "--kubelet-socket", str(node.kubelet_socket)], module="startprobe")
        timeout = 300 if callgrind is not None else 30
        node.wait_for(lambda s: s["resources"].get(RESOURCE, {}).get("allocatable") == expected, timeout=timeout)
        cpu = cpu_ms(proc.pid)
        code = node.stop("plugin", signal.SIGTERM, timeout=timeout)
        if code != 0:
            raise SystemExit(f"bench/start_profile.py: the plugin exited {code}:\n{node.log_tail('plugin')}")
        log = node.log("plugin")
        report = json.loads(probe.read_text())
    rows = IMPORT_LINE.findall(log)
    instructions = None
    if callgrind is not None:
        found = re.search(r"Collected : (\d+)", log)
        instructions = int(found.group(1)) if found else None
    return {
        "cpu_ms": cpu,
        "modules": len(rows),
        "cumulative_us": {name: int(cum) for _, cum, _, name in rows},
        "dataclasses": report["dataclasses"],
        "kubegpu_modules": len(report["kubegpu_modules"]),
        "instructions": instructions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="dgx-a100", help="simulated machine profile (default dgx-a100)")
    parser.add_argument("--nvml", action="store_true", help="the NVML backend on the fake library instead")
    parser.add_argument("--fake-profile", default="dgx-a100", help="what the fake library shows (with --nvml)")
    parser.add_argument("--repeat", type=int, default=5, help="starts to profile (default 5)")
    parser.add_argument("--top", type=int, default=15, help="cumulative imports to list (default 15)")
    parser.add_argument("--instructions", action="store_true", help="also count one start's instructions (valgrind)")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object, last")
    args = parser.parse_args()
    if args.repeat < 1 or args.top < 0:
        parser.error("--repeat must be at least 1 and --top at least 0")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH")
    compileall.compile_dir(Path(kubegpu.__file__).parent, quiet=1)
    work = Path(tempfile.mkdtemp(prefix="kg-startprof-", dir="/tmp"))
    try:
        env = nvml_env(args.fake_profile, work) if args.nvml else dict(os.environ)
        machine = None if args.nvml else args.machine
        backend = f"nvml on the fake library ({args.fake_profile})" if args.nvml else f"simulated {args.machine}"
        from kubegpu.gpu import profiles

        expected = len(profiles.load(args.fake_profile if args.nvml else args.machine).gpus)
        load_start = os.getloadavg()[0]
        runs = [one_start(machine, env, expected) for _ in range(args.repeat)]
        instructions = None
        if args.instructions:
            instructions = one_start(machine, env, expected, callgrind=work / "callgrind.out")["instructions"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first = runs[0]
    cpu = [r["cpu_ms"] for r in runs]
    least: dict[str, int] = {}
    for r in runs:
        for name, us in r["cumulative_us"].items():
            least[name] = min(us, least.get(name, us))
    top = sorted(least.items(), key=lambda kv: -kv[1])[: args.top]
    load_end = os.getloadavg()[0]
    print(f"plugin start profile: {backend}, {args.repeat} starts, load average {load_start:.1f} -> {load_end:.1f}")
    print(f"modules imported from exec to SIGTERM: {first['modules']} (kubegpu: {first['kubegpu_modules']})")
    print(f"kubegpu dataclasses built: {len(first['dataclasses'])}")
    print(f"plugin CPU time when registered (ms): median {statistics.median(cpu):.0f}, min {min(cpu):.0f}")
    if instructions is not None:
        print(f"instructions, exec to exit after SIGTERM (callgrind): {instructions / 1e6:.1f} M")
    print("top cumulative imports (ms, least of the runs):")
    for name, us in top:
        print(f"  {us / 1000:7.1f}  {name}")
    if args.json:
        figures = {
            "backend": "nvml" if args.nvml else "simulated",
            "machine": args.fake_profile if args.nvml else args.machine,
            "modules": first["modules"],
            "kubegpu_modules": first["kubegpu_modules"],
            "dataclasses": len(first["dataclasses"]),
            "dataclass_names": first["dataclasses"],
            "start_cpu_ms": round(statistics.median(cpu), 1),
            "start_cpu_min_ms": round(min(cpu), 1),
            "instructions_m": None if instructions is None else round(instructions / 1e6, 1),
            "top_cumulative_ms": {name: round(us / 1000, 2) for name, us in top},
            "load_average_start": load_start,
            "load_average_end": load_end,
        }
        print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
