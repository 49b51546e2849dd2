"""``python -m kubegpu.gpu.nvml``: what NVML sees on this machine, without starting a plugin.

Owns a small inspection command: the inventory (one line per GPU and MIG
device, the topology matrix) or the canonical JSON (``--json``, the same form
as ``kubegpu machines export``), optionally one telemetry sample. Exits 1 with
one line naming the library paths tried when NVML is unavailable. Must not
contain discovery logic (that is :mod:`.discovery`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from kubegpu.gpu import errors, profiles
from kubegpu.gpu.model import Machine
from kubegpu.gpu.nvml.backend import NvmlBackend


def describe(machine: Machine) -> list[str]:
    """Human-readable inventory lines."""
    lines = [
        f"driver {machine.driver_version}, CUDA {machine.cuda_driver_version}, machine {machine.machine_type}",
    ]
    for gpu in machine.gpus:
        cc = f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}"
        mig = "MIG on" if gpu.mig_enabled else ("MIG off" if gpu.mig_capable else "no MIG")
        lines.append(
            f"GPU {gpu.index} {gpu.uuid} {gpu.product_name} {gpu.memory_mib} MiB bus {gpu.pci_bus_id} "
            f"minor {gpu.minor} NUMA {gpu.numa_node} cc {cc} SMs {gpu.multiprocessors} {mig}"
        )
        for mig_device in gpu.mig_devices:
            lines.append(
                f"  MIG {mig_device.id_index} {mig_device.uuid} {mig_device.profile} "
                f"GI {mig_device.gi_id} CI {mig_device.ci_id} {mig_device.memory_mib} MiB"
            )
    topology = machine.topology
    for i in range(topology.size):
        cells = []
        for j in range(topology.size):
            link = topology.pcie[i][j]
            nvlinks = topology.nvlink[i][j]
            cells.append("X" if link is None else (f"NV{nvlinks}" if nvlinks else link.smi))
        fabric = f" fabric {topology.nvswitch[i]} ({topology.nvswitch_links[i]} links)" if topology.nvswitch[i] else ""
        lines.append(f"topo GPU{i}: {' '.join(f'{c:>5}' for c in cells)}{fabric}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubegpu.gpu.nvml", description=__doc__.splitlines()[0])
    parser.add_argument("--driver-root", default="/", help="host path of the driver installation (default /)")
    parser.add_argument(
        "--container-driver-root", default="/driver-root", help="driver root inside a container (default /driver-root)"
    )
    parser.add_argument(
        "--sysfs-root", default=None, help="where sysfs is mounted (default $KUBEGPU_SYSFS_ROOT or /sys)"
    )
    parser.add_argument("--json", action="store_true", help="print the canonical machine JSON instead")
    parser.add_argument("--sample", action="store_true", help="also print one telemetry sample as JSON lines")
    args = parser.parse_args(argv)
    backend = NvmlBackend(
        driver_root=args.driver_root, container_driver_root=args.container_driver_root, sysfs_root=args.sysfs_root
    )
    try:
        machine = backend.discover()
        if args.json:
            sys.stdout.write(profiles.export_json(machine))
        else:
            print(f"library {backend.library_path}")
            print("\n".join(describe(machine)))
        if args.sample:
            for gpu in backend.sample().gpus:
                print(json.dumps(dataclasses.asdict(gpu), sort_keys=True))
    except errors.NvmlUnavailable as exc:
        print(f"nvml: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
