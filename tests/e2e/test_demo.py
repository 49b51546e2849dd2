"""``kubegpu demo`` runs the whole node story and its summary says every check held."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.timeout(120)
def test_the_demo_ends_with_an_ok_summary_and_leaves_nothing_behind() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "--json"], capture_output=True, text=True, timeout=110
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    summary = events[-1]
    assert summary["event"] == "summary", done.stdout[-2000:]
    assert summary["ok"] is True, (summary, done.stderr[-2000:])
    assert done.returncode == 0
    checks = {e["check"]: e["ok"] for e in events if e["event"] == "check"}
    assert checks["allocatable drops by one"] and checks["allocations survive the kubelet restart"]
    assert {e["process"] for e in events if e["event"] == "started"} == {"kubelet", "plugin", "exporter"}
    admitted = {e["pod"]: e["gpus"] for e in events if e["event"] == "admitted"}
    assert admitted == {"demo/infer": 1, "demo/finetune": 2, "demo/train": 4}


def test_the_demo_refuses_a_machine_it_cannot_tell_the_story_on() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "--machine", "pcie-4xt4"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "needs at least 8 whole GPUs" in done.stderr
    assert "(it runs on dgx-a100, dgx1-v100, hgx-h200, hgx2-v100, pcie-16xa40)" in done.stderr
    mig = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "--machine", "a100-mig"], capture_output=True, text=True
    )
    assert mig.returncode == 2 and "pick a machine without MIG (it runs on dgx-a100" in mig.stderr
