"""``kubegpu topology``: a machine's GPU pair matrix, and GPU picks by policy.

Owns the command line of placement: reading a profile or a ``--topology``
JSON file, parsing index lists, printing. The only module of the package that
reads files and prints; the decisions are :mod:`kubegpu.placement.policies`'.
Bad input (unknown profile, malformed file, bad list, impossible request)
exits 2 with one line naming the problem.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kubegpu.gpu import errors as gpu_errors
from kubegpu.gpu import profiles
from kubegpu.gpu.model import PcieLink, Topology
from kubegpu.placement import errors, matrix, policies
from kubegpu.placement import weights as weights_

_LEGEND = [
    "Legend:",
    "  X     = self",
    *(f"  {link.smi:<5} = {link.value:<13} (PCIe score {weights_.PCIE_WEIGHT[link]})" for link in PcieLink),
    f"  NV#   = # NVLinks between the pair (score {weights_.NVLINK_WEIGHT} each); on an NVSwitch fabric the",
    "          fewer of the two GPUs' fabric links, which best-effort does not credit and topology does",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubegpu topology", description="A machine's GPU topology, and which GPUs a placement policy picks."
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = sub.add_parser("show", help="the pair matrix (like nvidia-smi topo -m), NVSwitch and NUMA per GPU")
    show.add_argument("--machine", required=True, help="a shipped profile name or a profile file")
    pick = sub.add_parser("pick", help="print the GPUs a policy picks, comma-separated, ascending")
    source = pick.add_mutually_exclusive_group(required=True)
    source.add_argument("--machine", help="a shipped profile name or a profile file")
    source.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help='JSON: {"gpus": N, "pcie": NxN link names, "nvlink": NxN counts, "numa": [...], "nvswitch": [...]}',
    )
    pick.add_argument("--available", required=True, metavar="LIST", help="free GPU indices, e.g. 0,1,2,3")
    pick.add_argument("--must-include", default="", metavar="LIST", help="indices that must be picked")
    pick.add_argument("--size", required=True, type=int, help="how many GPUs to pick")
    pick.add_argument(
        "--policy",
        default=policies.DEFAULT_WHOLE_GPU_POLICY,
        choices=policies.WHOLE_GPU_POLICIES,
        help=f"placement policy (default: {policies.DEFAULT_WHOLE_GPU_POLICY})",
    )
    pick.add_argument("--explain", action="store_true", help="also print the partition the pick came from")
    return parser


def _indices(parser: argparse.ArgumentParser, option: str, text: str) -> list[int]:
    values = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            values.append(int(part))
        except ValueError:
            parser.error(f"{option}: {part!r} is not a GPU index (expected a list like 0,1,2)")
    return values


def _load_topology(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Topology:
    try:
        if args.machine is not None:
            return profiles.load(args.machine).topology
        path: Path = args.topology
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            parser.error(f"{path}: cannot read: {exc.strerror}")
        except json.JSONDecodeError as exc:
            parser.error(f"{path}: not valid JSON: {exc}")
        return profiles.topology_from_dict(data, source=str(path))
    except gpu_errors.ProfileError as exc:
        parser.error(str(exc))


def show(topology: Topology, title: str) -> list[str]:
    """The lines of ``kubegpu topology show``."""
    n = topology.size
    names = [f"GPU{i}" for i in range(n)]
    cells = matrix.link_matrix(topology)
    width = max(len(c) for row in cells for c in row + names) + 1
    fabric_width = max([8, *(len(f) for f in topology.nvswitch if f is not None)]) + 1
    lines = [title, " " * 7 + "".join(name.ljust(width) for name in names) + "NVSwitch".ljust(fabric_width) + "NUMA"]
    for i in range(n):
        fabric = topology.nvswitch[i]
        switch = "-" if fabric is None else f"{fabric}"
        numa = "-" if topology.numa[i] is None else str(topology.numa[i])
        row = "".join(c.ljust(width) for c in cells[i])
        lines.append(f"{names[i]:<7}{row}{switch.ljust(fabric_width)}{numa}")
    links = sorted({topology.nvswitch_links[i] for i in range(n) if topology.nvswitch[i] is not None})
    if links:
        lines.append(f"NVSwitch links per GPU: {', '.join(map(str, links))}")
    return [*lines, "", *_LEGEND]


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    topology = _load_topology(parser, args)
    if args.action == "show":
        print("\n".join(show(topology, f"{args.machine}: {topology.size} GPUs")))
        return 0
    available = _indices(parser, "--available", args.available)
    must_include = _indices(parser, "--must-include", args.must_include)
    try:
        solution = policies.solve(args.policy, topology, available, must_include, args.size)
    except errors.PlacementError as exc:
        parser.error(str(exc))
    print(",".join(str(i) for i in solution.chosen))
    if args.explain:
        sets = " ".join("{" + ",".join(map(str, s)) + "}" for s in solution.partition)
        print(f"partition: {sets}")
        if args.policy == policies.TOPOLOGY:
            # topology's weights are link score × scale + same-NUMA pairs; show the two parts.
            links, numa = divmod(solution.score, weights_.numa_scale(topology.size))
            print(f"partition score: {links} (NVSwitch counted as NVLink), same-NUMA pairs: {numa}")
        else:
            print(f"partition score: {solution.score}")
    return 0
