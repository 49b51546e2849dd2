"""bench/lookahead_why.py's reading of a run: failures by 100 % load, idle GPU by cause, empty 8-GPU nodes broken.

The clusters here are small enough that what any policy does is known: pods of one shape, so the
arrival order does not matter, and nodes where the scheduler's choice follows from its rule.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubegpu.scheduling.core.model import NodeSpec, PodSpec

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "lookahead_why.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lookahead_why", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


WHY = _script()


@pytest.mark.parametrize("policy", ["fgd", "lookahead", "bestfit", "random"])
def test_pods_failing_for_cpu_count_by_class_and_leave_whole_gpus_idle_for_want_of_cpu(policy: str) -> None:
    # One 8-GPU node with 16 cores; each pod asks 1 GPU and 4 cores: the fifth pod, at 62.5 % load, finds no CPU.
    nodes = [NodeSpec("a", 16_000, 256_000, 8, "V100")]
    pods = [PodSpec(f"p{i}", 4_000, 1_000, 1, 1000) for i in range(8)]
    run = WHY.analyse(nodes, pods, policy, seed=1)
    assert run.failed == {"1g": 4.0}  # pods 5 to 8 arrive by 100 %
    assert run.first == {"1g": 62.5}
    assert run.u100 == pytest.approx(50.0)
    assert run.idle["whole GPUs, node lacks CPU/memory"] == pytest.approx(50.0)
    assert run.idle["partly used GPUs"] == 0
    assert sum(run.idle.values()) == pytest.approx(run.u100)
    # The first pod had to break the only node, so no other node could have taken it.
    assert sum(run.breaks.values()) == 1 and run.early_breaks == 1 and run.chosen_breaks == 0
    assert run.last_empty == 12.5


@pytest.mark.parametrize(
    ("policy", "chosen", "last_empty"),
    [("most-allocated", 0, 30.0), ("least-allocated", 1, 10.0)],
    ids=["packing-fills-the-small-node-first", "spreading-breaks-the-big-node-first"],
)
def test_an_empty_8_gpu_node_broken_while_another_node_fitted_the_pod_is_counted(
    policy: str, chosen: int, last_empty: float
) -> None:
    # An 8-GPU node and a 2-GPU node; 1-GPU pods. Packing puts the first two on the small node, so the third breaks
    # the big node with nowhere else to go; spreading puts the first on the big node while the small one was free.
    nodes = [NodeSpec("big", 64_000, 256_000, 8, "V100"), NodeSpec("small", 16_000, 64_000, 2, "V100")]
    pods = [PodSpec(f"p{i}", 1_000, 1_000, 1, 1000) for i in range(10)]
    run = WHY.analyse(nodes, pods, policy, seed=1)
    assert run.breaks == {("1g", "V100"): 1}
    assert (run.early_breaks, run.chosen_breaks) == (1, chosen)
    assert run.last_empty == last_empty
    assert run.failed == {}  # ten 1-GPU pods fill ten GPUs at 100 %
    assert run.u100 == 0


def test_a_lookahead_placement_on_an_empty_8_gpu_node_records_its_score_terms_against_the_best_used_node() -> None:
    # A 1-GPU, 3-core pod on the 2-GPU, 4-core node would leave a GPU with 1 core that no pod of the workload can
    # use, so lookahead breaks the empty 8-GPU node instead: the record says so by the fragmentation term.
    nodes = [NodeSpec("big", 64_000, 256_000, 8, "V100"), NodeSpec("small", 4_000, 64_000, 2, "V100")]
    pods = [PodSpec(f"p{i}", 3_000, 1_000, 1, 1000) for i in range(10)]
    run = WHY.analyse(nodes, pods, "lookahead", seed=1)
    assert (run.early_breaks, run.chosen_breaks) == (1, 1)
    assert len(run.ranked) == 1
    chosen, other = run.ranked[0]
    assert len(chosen) == len(other) == len(WHY.TERMS) + 1  # the terms, then the normalised score
    assert chosen[-1] > other[-1]
    assert chosen[0] - other[0] == pytest.approx(1000)  # the stranded GPU on the small node, in milli


def test_bad_seeds_stop_with_one_line_and_status_2() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--seeds", "a-b"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 2
    assert "--seeds" in done.stderr.splitlines()[-1]
    assert "Traceback" not in done.stderr
