"""``kubegpu machines``: list, show and export the shipped simulated machine profiles.

Owns the command line only; the data and its expansion live in :mod:`kubegpu.gpu.profiles`.
"""

from __future__ import annotations

import argparse
import sys

from kubegpu.gpu import errors, profiles


def main(argv: list[str]) -> int:
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
