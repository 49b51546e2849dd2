"""``kubegpu scheduler`` on bad input: one line naming the problem, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .cluster import ROOT

BAD_PLUGIN = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: gpu-scheduler
    plugins:
      score:
        enabled:
          - name: NodeResourcesGPU
            weight: 100
"""

MALFORMED_KEY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: gpu-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: nvidia.com/gpu
                wieght: 100
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu.cli", "scheduler", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (BAD_PLUGIN, 'profiles[0].plugins.score.enabled[0].name: ScorePlugin "NodeResourcesGPU" does not exist'),
        (MALFORMED_KEY, "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].wieght: unknown key"),
        ("profiles: [\n", "not valid YAML"),
    ],
    ids=["unknown-plugin", "malformed-key", "not-yaml"],
)
def test_a_bad_config_exits_2_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = _run("--config", str(config), "--kubeconfig", str(tmp_path / "unused"))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kubegpu scheduler: error: {config}: ") and named in line


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (
            ["--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "10s"],
            "leaseDuration: must be greater",
        ),
        (["--leader-elect-retry-period", "two"], "--leader-elect-retry-period: must be a duration"),
        (["--metrics-listen", "nowhere"], "--metrics-listen: expected HOST:PORT"),
    ],
    ids=["lease-order", "duration", "listen"],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, flags: list[str], named: str) -> None:
    result = _run(*flags, "--kubeconfig", str(tmp_path / "unused"))
    assert result.returncode == 2
    assert named in result.stderr and "Traceback" not in result.stderr


def test_a_missing_kubeconfig_exits_2_naming_it(tmp_path: Path) -> None:
    result = _run("--kubeconfig", str(tmp_path / "absent"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"kubegpu scheduler: error: --kubeconfig {tmp_path / 'absent'}")


@pytest.mark.parametrize("text", ["- a list\n", "clusters: 5\n", "clusters: [1]\n"], ids=["list", "int", "entry"])
def test_a_kubeconfig_of_the_wrong_shape_exits_2_in_one_line(tmp_path: Path, text: str) -> None:
    kc = tmp_path / "kc"
    kc.write_text(text)
    result = _run("--kubeconfig", str(kc))
    assert result.returncode == 2
    assert result.stderr.startswith(f"kubegpu scheduler: error: cannot load a kubeconfig from {kc}: not a kubeconfig")
    assert len(result.stderr.strip().splitlines()) == 1
