"""The hardware model's command lines: ``kubegpu fault`` and ``kubegpu machines``.

Owns the command line of fault injection (``kubegpu fault``: it validates the GPU
against the machine profile and appends to the machine's fault journal, which
every running simulated backend of that machine tails) and of the shipped machine
profiles (``kubegpu machines list|show|export``; the data and its expansion live
in :mod:`kubegpu.gpu.profiles`). Must not touch a real GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubegpu.gpu import errors, faults, profiles, xid
from kubegpu.gpu.model import Machine


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubegpu fault",
        description="Inject a fault into a simulated machine. Every kubegpu process simulating that machine "
        "(plugin, exporter) sees it within milliseconds.",
    )
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--machine", default="dgx-a100", help="simulated machine profile (default: dgx-a100)")
    target.add_argument(
        "--fault-file",
        type=Path,
        help="the machine's fault journal (default: $KUBEGPU_FAULT_FILE, else one per user, machine and working "
        "directory under $XDG_RUNTIME_DIR/kubegpu or <tmp>/kubegpu-<uid>); pass the same path the plugin was "
        "started with",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    xid = sub.add_parser("xid", parents=[target], help="an XID critical error")
    xid.add_argument("--gpu", required=True, help="GPU index or UUID")
    xid.add_argument("--xid", type=int, required=True, help="XID number, e.g. 79 (fallen off the bus)")
    xid.add_argument("--mig", type=int, help="narrow to the MIG device with this index on the GPU")
    ecc = sub.add_parser("ecc", parents=[target], help="an ECC error (double-bit unless --single-bit)")
    ecc.add_argument("--gpu", required=True, help="GPU index or UUID")
    ecc.add_argument("--single-bit", action="store_true", help="a corrected single-bit error instead")
    ecc.add_argument("--mig", type=int, help="narrow to the MIG device with this index on the GPU")
    lost = sub.add_parser("lost", parents=[target], help="the GPU falls off the bus")
    lost.add_argument("--gpu", required=True, help="GPU index or UUID")
    recover = sub.add_parser("recover", parents=[target], help="the GPU is healthy again")
    recover.add_argument("--gpu", required=True, help="GPU index or UUID")
    sub.add_parser("list", parents=[target], help="print the journal")
    sub.add_parser("clear", parents=[target], help="remove the journal: every GPU healthy again, no XID history")
    sub.add_parser("path", parents=[target], help="print where the journal is")
    return parser


def fault_main(argv: list[str]) -> int:
    """``kubegpu fault``."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        machine = profiles.load(args.machine)
    except errors.ProfileError as exc:
        parser.error(str(exc))
    path: Path = args.fault_file or faults.default_path(machine.name)
    if args.action == "path":
        print(path)
        return 0
    if args.action == "list":
        try:
            for fault in faults.read_all(path):
                print(fault.to_json())
        except errors.GpuError as exc:
            print(f"kubegpu fault: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.action == "clear":
        try:
            removed = faults.clear(path)
        except OSError as exc:
            print(f"kubegpu fault: cannot remove {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"cleared {path}" if removed else f"no journal at {path}")
        return 0
    gpu = _gpu_index(machine, args.gpu)
    if gpu is None:
        parser.error(f"--gpu {args.gpu!r}: no such GPU on {machine.name} (0-{len(machine.gpus) - 1} or a UUID)")
    mig = getattr(args, "mig", None)
    if mig is not None and not 0 <= mig < len(machine.gpus[gpu].mig_devices):
        parser.error(f"--mig {mig}: GPU {gpu} of {machine.name} has {len(machine.gpus[gpu].mig_devices)} MIG devices")
    if args.action == "xid":
        if args.xid <= 0:
            parser.error(f"--xid must be a positive XID number, got {args.xid}")
        fault = faults.Fault(kind="xid", gpu=gpu, xid=args.xid, mig=mig)
    elif args.action == "ecc":
        fault = faults.Fault(kind="ecc-sbe" if args.single_bit else "ecc-dbe", gpu=gpu, mig=mig)
    elif args.action == "lost":
        fault = faults.Fault(kind="lost", gpu=gpu)
    else:
        fault = faults.Fault(kind="recover", gpu=gpu)
    try:
        faults.append(path, fault)
    except OSError as exc:
        print(f"kubegpu fault: cannot write the fault journal {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    meaning = "" if fault.xid is None else f" ({xid.meaning(fault.xid)})"
    print(f"injected {fault.kind}{'' if fault.xid is None else f' {fault.xid}'}{meaning} on GPU {gpu} -> {path}")
    return 0


def _gpu_index(machine: Machine, value: str) -> int | None:
    if value.isdigit():
        index = int(value)
        return index if 0 <= index < len(machine.gpus) else None
    gpu = machine.gpu_by_uuid(value)
    return None if gpu is None else gpu.index


def machines_main(argv: list[str]) -> int:
    """``kubegpu machines``."""
    parser = argparse.ArgumentParser(prog="kubegpu machines", description="Simulated machine profiles.")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("list", help="one line per shipped profile")
    show = sub.add_parser("show", help="the GPUs and MIG devices of a profile")
    show.add_argument("profile")
    export = sub.add_parser("export", help="the canonical JSON form (what the fake NVML library reads)")
    export.add_argument("profile")
    args = parser.parse_args(argv)
    if args.action == "list":
        for name in profiles.available():
            machine = profiles.load(name)
            print(f"{name:<14} {len(machine.gpus):>2} GPUs  {machine.description}")
        return 0
    try:
        machine = profiles.load(args.profile)
    except errors.ProfileError as exc:
        parser.error(str(exc))
    if args.action == "export":
        sys.stdout.write(profiles.export_json(machine))
        return 0
    print(f"{machine.name}: {machine.description}")
    print(f"driver {machine.driver_version}, CUDA {machine.cuda_driver_version}, {machine.machine_type}")
    for gpu in machine.gpus:
        mig = f"  MIG: {', '.join(d.profile for d in gpu.mig_devices)}" if gpu.mig_enabled else ""
        cc = f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}"
        print(
            f"  GPU {gpu.index}  {gpu.uuid}  {gpu.product_name}  {gpu.memory_mib} MiB  "
            f"bus {gpu.pci_bus_id}  NUMA {gpu.numa_node}  cc {cc}{mig}"
        )
    return 0
