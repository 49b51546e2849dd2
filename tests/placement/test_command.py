"""``kubegpu topology`` through the real CLI, as separate processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.gpu import profiles


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", "topology", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_show_prints_the_pair_matrix_with_nvlink_counts_pcie_nvswitch_and_numa() -> None:
    result = run("show", "--machine", "dgx1-v100")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == [*(f"GPU{i}" for i in range(8)), "NVSwitch", "NUMA"]
    assert lines[2].split() == ["GPU0", "X", "NV1,PIX", "NV1,PHB", "NV2,PHB", "NV2,SYS", "SYS", "SYS", "SYS", "-", "0"]
    assert lines[9].split()[-1] == "1"
    assert any("PIX" in line and "single-switch" in line for line in lines)


def test_show_marks_nvswitch_fabrics_and_counts_their_links() -> None:
    result = run("show", "--machine", "dgx-a100")
    assert result.returncode == 0, result.stderr
    row = result.stdout.splitlines()[2].split()
    assert row[:4] == ["GPU0", "X", "NV12,PXB", "NV12,NODE"]
    assert row[-2:] == ["dgx-a100-fabric0", "0"]
    assert "NVSwitch links per GPU: 12" in result.stdout


def test_pick_answers_the_worked_example_on_one_line_ascending() -> None:
    first = run(
        "pick", "--machine", "dgx1-v100", "--available", "0,1,2,3,4,5,6,7", "--size", "2", "--policy", "best-effort"
    )
    assert (first.returncode, first.stdout) == (0, "0,3\n")
    second = run(
        "pick", "--machine", "dgx1-v100", "--available", "7,6,5,4,2,1", "--size", "2", "--policy", "best-effort"
    )
    assert (second.returncode, second.stdout) == (0, "1,2\n")


def test_pick_defaults_to_the_topology_policy_and_honours_must_include() -> None:
    result = run(
        "pick", "--machine", "dgx-a100", "--available", "0,1,2,3,4,5,6,7", "--must-include", "6", "--size", "4"
    )
    assert (result.returncode, result.stdout) == (0, "4,5,6,7\n")


def test_pick_explain_shows_the_partition_and_its_score() -> None:
    result = run(
        "pick", "--machine", "dgx1-v100", "--available", "0,4,5,6,7", "--size", "2", "--policy", "topology", "--explain"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "4,7",
        "partition: {0} {4,7} {5,6}",
        "partition score: 460 (NVSwitch counted as NVLink), same-NUMA pairs: 2",
    ]


def test_pick_reads_a_topology_file(tmp_path: Path) -> None:
    path = tmp_path / "two-fabrics.json"
    path.write_text(
        json.dumps(
            {
                "gpus": 4,
                "pcie": [
                    [None, "same-cpu", "single-switch", "cross-cpu"],
                    ["same-cpu", None, "cross-cpu", "single-switch"],
                    ["single-switch", "cross-cpu", None, "same-cpu"],
                    ["cross-cpu", "single-switch", "same-cpu", None],
                ],
                "nvlink": [[0] * 4] * 4,
                "numa": [0, 0, 0, 0],
                "nvswitch": ["a", "a", "b", "b"],
            }
        )
    )
    best_effort = run(
        "pick", "--topology", str(path), "--available", "0,1,2,3", "--size", "2", "--policy", "best-effort"
    )
    topology = run("pick", "--topology", str(path), "--available", "0,1,2,3", "--size", "2", "--policy", "topology")
    assert (best_effort.returncode, best_effort.stdout) == (0, "0,2\n")
    assert (topology.returncode, topology.stdout) == (0, "0,1\n")


def test_a_canonical_profile_topology_round_trips_through_a_file(tmp_path: Path) -> None:
    path = tmp_path / "a100.json"
    path.write_text(json.dumps(profiles.topology_to_dict(profiles.load("dgx-a100").topology)))
    result = run("pick", "--topology", str(path), "--available", "0,1,2,3,4,5,6,7", "--size", "4")
    assert (result.returncode, result.stdout) == (0, "0,1,2,3\n")


BAD_FILES = [
    ("not-json", "{gpus: 2", "not valid JSON"),
    (
        "bad-link",
        '{"gpus": 2, "pcie": [[null, "nvlink"], ["nvlink", null]], "nvlink": [[0, 0], [0, 0]]}',
        "pcie[0][1]: 'nvlink' is not one of",
    ),
    ("wrong-shape", '{"gpus": 3, "pcie": [[null]], "nvlink": [[0]]}', "pcie: must be a 3x3 matrix"),
    (
        "asymmetric",
        '{"gpus": 2, "pcie": [[null, "same-cpu"], ["same-cpu", null]], "nvlink": [[0, 2], [1, 0]]}',
        "nvlink[0][1] and nvlink[1][0] differ",
    ),
    ("unknown-key", '{"gpus": 1, "pcie": [[null]], "nvlink": [[0]], "links": 3}', "links: unknown key"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_malformed_topology_file_exits_2_naming_the_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "topology.json"
    path.write_text(text)
    result = run("pick", "--topology", str(path), "--available", "0", "--size", "1")
    assert result.returncode == 2
    assert str(path) in result.stderr
    assert message in result.stderr
    assert result.stdout == ""


BAD_ARGS = [
    (
        "missing-file",
        ["--topology", "/nonexistent/t.json", "--available", "0", "--size", "1"],
        "/nonexistent/t.json: cannot read",
    ),
    (
        "unknown-machine",
        ["--machine", "dgx-9000", "--available", "0", "--size", "1"],
        "unknown machine profile 'dgx-9000'",
    ),
    (
        "not-an-index",
        ["--machine", "dgx-a100", "--available", "0,one", "--size", "1"],
        "--available: 'one' is not a GPU index",
    ),
    ("too-big", ["--machine", "dgx-a100", "--available", "0,1", "--size", "3"], "cannot pick 3 GPUs from 2 available"),
    ("off-node", ["--machine", "dgx-a100", "--available", "0,8", "--size", "1"], "available GPU 8 is not on this node"),
    (
        "must-not-free",
        ["--machine", "dgx-a100", "--available", "0,1", "--must-include", "2", "--size", "2"],
        "must-include GPU 2 is not in the available list",
    ),
    (
        "shared-policy",
        ["--machine", "dgx-a100", "--available", "0,1", "--size", "1", "--policy", "packed"],
        "invalid choice: 'packed'",
    ),
    (
        "both-sources",
        ["--machine", "dgx-a100", "--topology", "x.json", "--available", "0", "--size", "1"],
        "not allowed with argument",
    ),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments_exit_2_naming_the_problem(args: list[str], message: str) -> None:
    result = run("pick", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_show_of_an_unknown_machine_exits_2() -> None:
    result = run("show", "--machine", "nope")
    assert result.returncode == 2
    assert "unknown machine profile 'nope'" in result.stderr
