"""bench/trace_variants.py as a user runs it: CSVs that read back as the variant asked for, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.scheduling.simulate.trace import read_pods
from kubegpu.scheduling.simulate.variants import constrained_share, multi_gpu_share

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "trace_variants.py"
TRACES = REPO.parent / "shared" / "traces" / "alibaba-gpu-v2023"

needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@needs_traces
def test_the_script_writes_variants_that_read_back_with_the_asked_share(tmp_path: Path) -> None:
    done = _run("--out", str(tmp_path), "--variants", "multigpu40,gpuspec20", "--draws", "2")
    assert done.returncode == 0, done.stderr
    multi = [read_pods(tmp_path / f"openb_pod_list_multigpu40@{d}.csv") for d in range(2)]
    spec = read_pods(tmp_path / "openb_pod_list_gpuspec20@0.csv")
    assert all(0.40 <= multi_gpu_share(pods) < 0.41 for pods in multi)
    assert [p.name for p in multi[0]] != [p.name for p in multi[1]]  # two draws, two lists
    assert constrained_share(spec) == pytest.approx(0.20, abs=1e-3)
    assert len(done.stdout.splitlines()) == 4  # one line per file written


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--variants", "multigpu99"), "unknown variant(s) multigpu99"), (("--draws", "0"), "--draws must be")],
    ids=["unknown-variant", "no-draws"],
)
def test_bad_arguments_stop_with_one_line_and_status_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = _run("--out", str(tmp_path), *args)
    assert done.returncode == 2
    assert message in done.stderr.splitlines()[-1]
    assert "Traceback" not in done.stderr
