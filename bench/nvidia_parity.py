"""Benchmark the NVIDIA-parity building blocks: config loading, resource maps, Allocate responses, CDI, labels.

All pure functions, timed in-process (p50 / p99 over repeated calls, after one warm-up call):

* loading the effective config from a config file with sharing (``config.load``);
* building the resource map: a mixed-MIG A100 node with time-sliced MIG profiles, and a DGX A100 with
  48 MPS replicas per GPU (384 advertised devices);
* one Allocate response (``responses.container_edits``): 1 and 8 devices, envvar, and every strategy at once
  with device specs and IMEX (the worst case);
* building and strictly validating the CDI spec of the mixed-MIG node;
* computing the GPU feature discovery labels of the mixed-MIG node;
* GetPreferredAllocation's mapping over ``kubegpu.placement`` (``preferred.Preferred``, tables built once):
  4 whole GPUs of a DGX A100 by topology, and 8 of the 384 MPS replicas, distributed.

Prints a table, then the lines README's performance table is filled from.

    python bench/nvidia_parity.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kubegpu.deviceplugin.cdi import generate, schema
from kubegpu.deviceplugin.config import effective
from kubegpu.deviceplugin.gfd import labels
from kubegpu.deviceplugin.rm import preferred, resource_map, responses
from kubegpu.gpu import profiles

MIXED = "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 4}, {name: mig-3g.40gb, replicas: 2}]}}"
MPS48 = "sharing: {mps: {renameByDefault: true, resources: [{name: gpu, replicas: 48}]}}"


def timed(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(p50, p99) in microseconds."""
    fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def load(argv: list[str], text: str, directory: Path) -> effective.Config:
    path = directory / "config.yaml"
    path.write_text(text)
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    return effective.load(parser.parse_args(["--config-file", str(path), *argv]), {})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    calls = ap.parse_args().calls
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        mixed_cfg = load(["--mig-strategy", "mixed"], MIXED, directory)
        mps_cfg = load(["--mps-root", "/run/nvidia/mps"], MPS48, directory)
        all_cfg = load(
            [
                "--device-list-strategy", "envvar,volume-mounts,cdi-annotations,cdi-cri",
                "--pass-device-specs", "--imex-channel-ids", "0", "--gdrcopy-enabled",
            ],
            "version: v1",
            directory,
        )  # fmt: skip
        a100_mig, dgx = profiles.load("a100-mig"), profiles.load("dgx-a100")

        rows.append(
            (
                "config.load (file with sharing)",
                *timed(lambda: load(["--mig-strategy", "mixed"], MIXED, directory), calls // 4),
            )
        )
        rows.append(
            (
                "resource map, a100-mig mixed + time-slicing",
                *timed(lambda: resource_map.build(a100_mig, mixed_cfg), calls // 4),
            )
        )
        rows.append(
            (
                "resource map, dgx-a100 MPS x48 (384 devices)",
                *timed(lambda: resource_map.build(dgx, mps_cfg), calls // 4),
            )
        )

        gpus = resource_map.build(dgx, all_cfg)["nvidia.com/gpu"]
        ids1, ids8 = [gpus.devices[0].id], [d.id for d in gpus.devices]
        envvar = responses.ResponseOptions()
        every = responses.ResponseOptions.from_config(all_cfg, cdi_features=("gdrcopy",))

        def edits(ids: list[str], options: responses.ResponseOptions) -> Callable[[], object]:
            return lambda: responses.container_edits(gpus, ids, options, exists=lambda p: True, new_uuid=lambda: "u")

        rows.append(("Allocate response, 1 GPU, envvar", *timed(edits(ids1, envvar), calls)))
        rows.append(("Allocate response, 8 GPUs, envvar", *timed(edits(ids8, envvar), calls)))
        rows.append(("Allocate response, 8 GPUs, every strategy + specs + IMEX", *timed(edits(ids8, every), calls)))

        def spec() -> object:
            built = generate.gpu_spec(
                a100_mig, generate.CdiOptions(mig_strategy="mixed", dev_root="/run/nvidia/driver")
            )
            return schema.parse(built.to_dict())

        rows.append(("CDI spec build + strict validation, a100-mig (25 devices)", *timed(spec, calls // 10)))
        rows.append(
            (
                "GFD labels, a100-mig mixed",
                *timed(lambda: labels.labels(a100_mig, mixed_cfg, machine_type="x", timestamp=1), calls // 4),
            )
        )

        whole_ids = [d.id for d in gpus.devices]
        by_topology = preferred.Preferred(gpus, dgx.topology, "topology")
        rows.append(
            (
                "GetPreferredAllocation, dgx-a100, 4 of 8 GPUs, topology",
                *timed(lambda: by_topology(whole_ids, [], 4), calls),
            )
        )
        replicas = resource_map.build(dgx, mps_cfg)["nvidia.com/gpu.shared"]
        replica_ids = [d.id for d in replicas.devices]
        spread = preferred.Preferred(replicas, dgx.topology, "distributed")
        rows.append(
            (
                "GetPreferredAllocation, 8 of 384 MPS replicas, distributed",
                *timed(lambda: spread(replica_ids, [], 8), calls),
            )
        )

    width = max(len(r[0]) for r in rows)
    print(f"{'what'.ljust(width)}  {'p50 us':>10}  {'p99 us':>10}")
    for what, p50, p99 in rows:
        print(f"{what.ljust(width)}  {p50:10.1f}  {p99:10.1f}")
    print()
    print("README rows:")
    alloc = {r[0]: r for r in rows}
    worst = alloc["Allocate response, 8 GPUs, every strategy + specs + IMEX"]
    one = alloc["Allocate response, 1 GPU, envvar"]
    rmap = alloc["resource map, dgx-a100 MPS x48 (384 devices)"]
    print(
        f"| Allocate response building p50 / p99: 1 GPU envvar; 8 GPUs every strategy + device specs + IMEX "
        f"| p99 <= 1 ms | {one[1]:.0f} / {one[2]:.0f} us; {worst[1]:.0f} / {worst[2]:.0f} us | bench/nvidia_parity.py |"
    )
    whole = alloc["GetPreferredAllocation, dgx-a100, 4 of 8 GPUs, topology"]
    shared = alloc["GetPreferredAllocation, 8 of 384 MPS replicas, distributed"]
    print(
        f"| GetPreferredAllocation mapping + placement p50 / p99 (pure): dgx-a100 4 of 8 GPUs, topology; "
        f"8 of 384 MPS replicas, distributed | p99 <= 1 ms | {whole[1]:.0f} / {whole[2]:.0f} us; "
        f"{shared[1]:.0f} / {shared[2]:.0f} us | bench/nvidia_parity.py |"
    )
    print(
        f"| resource map build, dgx-a100 with 48 MPS replicas per GPU (384 devices) p50 / p99 "
        f"| <= 50 ms | {rmap[1] / 1000:.1f} / {rmap[2] / 1000:.1f} ms | bench/nvidia_parity.py |"
    )


if __name__ == "__main__":
    main()
