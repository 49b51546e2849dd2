"""Build the FGD paper's multi-GPU and GPU-model-constrained trace variants from the shared default pod list.

The paper's ``multigpu20…50`` and ``gpuspec10…33`` lists are not in
``../shared``; this script builds lists of the same kind, several random
draws each, as ``kubegpu.scheduling.simulate.variants`` describes:

* ``multigpu<NN>@<draw>`` — the default pods plus copies of its own 2/4/8-GPU
  pods, drawn with replacement, until multi-GPU pods make NN % of the GPU
  request (NN in 20, 30, 40, 50);
* ``gpuspec<NN>@<draw>`` — the default pods with NN % of the GPU pods, chosen
  at random, constrained to GPU models drawn from the constraints that the
  shared ``gpuspec05`` list carries, per GPU count (NN in 05, 10, 20, 25, 34).

Draw d of a variant uses the random generator seeded with (d, kind, NN), so a
name always means the same list. The evaluation in ``bench/fgd_reproduction.py
--variants`` uses draws 0–2; draws 100 and above were used to explore and to
choose the policy's design, and never reported.

    python bench/trace_variants.py --out variants/                # every variant, draws 0-2, as CSV
    python bench/trace_variants.py --out variants/ --draws 5 --variants multigpu30,gpuspec34
    kubegpu simulate --trace-nodes ../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv \\
                     --trace-pods variants/openb_pod_list_multigpu30@0.csv --policy fgd,lookahead --seeds 42-51

Each CSV has the columns ``name, cpu_milli, memory_mib, num_gpu, gpu_milli,
gpu_spec`` and prints its measured share.
"""

from __future__ import annotations

import argparse
import csv
import sys
import zlib
from functools import cache
from pathlib import Path

import numpy as np

from kubegpu.scheduling.core.model import PodSpec
from kubegpu.scheduling.simulate.trace import read_pods
from kubegpu.scheduling.simulate.variants import (
    CONSTRAINED_SHARES,
    MULTI_GPU_SHARES,
    constrained_share,
    model_constrained_variant,
    multi_gpu_share,
    multi_gpu_variant,
    spec_mix,
)

TRACE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "alibaba-gpu-v2023"
KINDS = {"multigpu": MULTI_GPU_SHARES, "gpuspec": CONSTRAINED_SHARES}
VARIANTS = tuple(f"{kind}{round(100 * share):02d}" for kind, shares in KINDS.items() for share in shares)


@cache
def _shared(name: str) -> tuple[PodSpec, ...]:
    return tuple(read_pods(TRACE_DIR / f"openb_pod_list_{name}.csv"))


def build(name: str) -> list[PodSpec]:
    """A shared pod list by its name (``default``, ``cpu050``…) or a variant as ``multigpu30@0``."""
    variant, at, draw_text = name.partition("@")
    if not at:
        return list(_shared(name))
    if variant not in VARIANTS or not draw_text.isdigit():
        raise ValueError(f"unknown variant {name!r}: expected one of {', '.join(VARIANTS)} followed by @<draw>")
    kind, pct = variant[:-2], int(variant[-2:])
    rng = np.random.default_rng([int(draw_text), zlib.crc32(kind.encode()), pct])
    default = list(_shared("default"))
    if kind == "multigpu":
        return multi_gpu_variant(default, pct / 100, rng)
    return model_constrained_variant(default, pct / 100, spec_mix(_shared("gpuspec05")), rng)


def write(path: Path, pods: list[PodSpec]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"])
        for p in pods:
            out.writerow([p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, "|".join(sorted(p.gpu_models))])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSV files")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, e.g. multigpu30,gpuspec34")
    parser.add_argument("--draws", type=int, default=3, help="draws 0..N-1 of each variant")
    args = parser.parse_args()
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.draws < 1:
        parser.error(f"--draws must be at least 1, got {args.draws}")
    if not TRACE_DIR.is_dir():
        print(f"trace directory not found: {TRACE_DIR}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for variant in names:
        for draw in range(args.draws):
            name = f"{variant}@{draw}"
            pods = build(name)
            path = args.out / f"openb_pod_list_{name}.csv"
            write(path, pods)
            print(
                f"{path}: {len(pods)} pods, multi-GPU {100 * multi_gpu_share(pods):.1f} % of the GPU request, "
                f"{100 * constrained_share(pods):.1f} % of GPU pods model-constrained"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
