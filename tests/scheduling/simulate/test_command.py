"""``kubegpu simulate`` as a real process: default run, JSON lines, sweeps, policy list, bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.scheduling.core.policies import POLICIES
from kubegpu.scheduling.simulate import command


def simulate(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", "--log-level", "warning", "simulate", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_no_argument_run_finishes_prints_a_table_and_writes_the_plot(tmp_path: Path) -> None:
    done = simulate(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lookahead" in done.stdout and "unallocated" in done.stdout
    assert (tmp_path / "kubegpu-simulate.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "kubegpu-simulate.csv").exists() and (tmp_path / "kubegpu-simulate.json").exists()


def test_json_last_line_is_one_object_with_the_run_summary(tmp_path: Path) -> None:
    done = simulate(tmp_path, "--policy", "fgd", "--seed", "7", "--scale", "0.1", "--json", "--no-plot")
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["policy"] == "fgd" and last["seed"] == 7 and last["pods"] > 0 and last["seconds"] > 0
    assert isinstance(last["unallocated_gpu_pct"]["100"], float) and isinstance(
        last["unallocated_gpu_pct"]["130"], float
    )
    assert not (tmp_path / "kubegpu-simulate.png").exists()


def test_a_sweep_runs_every_policy_and_seed_in_parallel(tmp_path: Path) -> None:
    done = simulate(
        tmp_path, "--policy", "bestfit,most-allocated", "--seeds", "1-2", "--scale", "0.05", "--jobs", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert sorted((r["policy"], r["seed"]) for r in lines) == [
        ("bestfit", 1),
        ("bestfit", 2),
        ("most-allocated", 1),
        ("most-allocated", 2),
    ]
    assert (tmp_path / "kubegpu-simulate.png").exists()


def test_list_policies_names_every_policy(tmp_path: Path) -> None:
    done = simulate(tmp_path, "--list-policies")
    assert done.returncode == 0
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(POLICIES)


def test_trace_files_are_used_when_given(tmp_path: Path) -> None:
    (tmp_path / "n.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,4,T4\nn2,32000,65536,2,T4\n")
    (tmp_path / "p.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"p{i},2000,1024,1,{(300, 1000, 500)[i % 3]}\n" for i in range(9))
    )
    done = simulate(tmp_path, "--trace-nodes", "n.csv", "--trace-pods", "p.csv", "--policy", "fgd", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["pods"] >= 9


NODES = "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,T4\n"


def test_malformed_trace_exits_2_naming_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "bad.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,0,1,500\np2,1000,0,1,lots\n"
    )
    done = simulate(tmp_path, "--trace-nodes", "n.csv", "--trace-pods", "bad.csv")
    assert done.returncode == 2
    assert "bad.csv:3: column 'gpu_milli': 'lots' is not a number" in done.stderr
    (tmp_path / "nocol.csv").write_text("name,cpu_milli,num_gpu,gpu_milli\np1,1000,1,500\n")
    done = simulate(tmp_path, "--trace-nodes", "n.csv", "--trace-pods", "nocol.csv")
    assert done.returncode == 2 and "nocol.csv:1: column 'memory_mib': missing from the header" in done.stderr


def test_unknown_policy_and_bad_seeds_exit_2(tmp_path: Path) -> None:
    done = simulate(tmp_path, "--policy", "fastest")
    assert done.returncode == 2 and "unknown policy 'fastest'" in done.stderr
    done = simulate(tmp_path, "--seeds", "9-3")
    assert done.returncode == 2 and "'9-3' is not a seed or a range" in done.stderr
    done = simulate(tmp_path, "--weights", "gpu=3", "--scale", "0.05")
    assert done.returncode == 2 and "unknown resource 'gpu'" in done.stderr


def test_preemption_flag_evicts_lower_priority_pods_of_the_trace(tmp_path: Path) -> None:
    (tmp_path / "n.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,T4\n")
    rows = "".join(f"low{i},1000,0,1,1000,0\n" for i in range(2)) + "".join(
        f"high{i},1000,0,1,1000,9\n" for i in range(2)
    )
    (tmp_path / "p.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,priority\n" + rows)
    base = ["--trace-nodes", "n.csv", "--trace-pods", "p.csv", "--policy", "bestfit", "--load", "200", "--json"]
    results = [
        json.loads(simulate(tmp_path, *base, "--seed", str(s), "--preemption").stdout.splitlines()[-1])
        for s in range(6)
    ]
    assert all(r["failed"] + r["preempted"] == 2 for r in results)
    assert any(r["preempted"] > 0 for r in results)


def test_lookahead_knobs_run_and_bad_values_exit_2_naming_the_flag(tmp_path: Path) -> None:
    done = simulate(tmp_path, "--horizon", "10", "--gap-weight", "2.5", "--scale", "0.05", "--json", "--no-plot")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["policy"] == "lookahead"
    done = simulate(tmp_path, "--horizon", "0")
    assert done.returncode == 2 and "--horizon must be at least 1 pod, got 0" in done.stderr
    done = simulate(tmp_path, "--gap-weight", "-1")
    assert done.returncode == 2 and "--gap-weight must be a non-negative number, got -1.0" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "-1"], "--seed must be a non-negative integer, got -1"),
        (["--scale", "1e9"], "--scale must be within (0, 100], got 1000000000.0"),
        (["--seeds", "3,-2"], "is not a seed or a range"),
        (["--trace-nodes", "n.csv"], "--trace-nodes and --trace-pods go together"),
        (["--trace-pods", "p.csv"], "--trace-nodes and --trace-pods go together"),
        (["--name", "../escape"], "--name must be a file name without '/', got '../escape'"),
        (["--name", ".."], "--name must be a file name without '/'"),
        (["--trace-nodes", "nogpu.csv", "--trace-pods", "p.csv"], "nogpu.csv: the cluster has no GPU"),
    ],
    ids=["negative-seed", "huge-scale", "negative-in-seeds", "nodes-alone", "pods-alone", "name-escapes",
         "name-dotdot", "no-gpu"],
)  # fmt: skip
def test_bad_run_settings_exit_2_naming_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "nogpu.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,0,\n")
    (tmp_path / "p.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,0,1,500\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        command.main(["--scale", "0.05", *argv, "--no-plot"])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path.parent / "escape.csv").exists()


def test_a_run_that_places_no_pod_is_an_error_not_a_silent_success(tmp_path: Path) -> None:
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "p.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        + "".join(f"p{i},1000,0,1,1000,H100\n" for i in range(4))
    )
    done = simulate(tmp_path, "--trace-nodes", "n.csv", "--trace-pods", "p.csv", "--policy", "fgd", "--no-plot")
    assert done.returncode == 1
    assert "fgd seed 42 placed none of its" in done.stderr and "GPU models no node has" in done.stderr
