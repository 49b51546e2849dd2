"""The alert rules in deploy/alerts: promtool checks and unit tests, annotations, and metrics that exist."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.monitoring.promql import exporter_metric_names, metric_names, plugin_metric_names

RULES = REPO / "deploy" / "alerts" / "kubegpu-rules.yaml"
RULES_TEST = REPO / "deploy" / "alerts" / "kubegpu-rules.test.yaml"


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian package 'prometheus'; .ci/run installs it)")
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def test_promtool_check_rules_accepts_the_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = promtool("test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("(DCGM_FI_DEV_XID_ERRORS) > 0", "(DCGM_FI_DEV_XID_ERRORS) > 100"),
        ("(DCGM_FI_DEV_GPU_TEMP) > 85", "(DCGM_FI_DEV_GPU_TEMP) > 95"),
        ("max without (container, namespace, pod) (DCGM_FI_DEV_GPU_UTIL)", "DCGM_FI_DEV_GPU_UTIL"),
    ],
    ids=["xid-threshold", "temperature-threshold", "per-pod-utilisation-alerts"],
)
def test_the_unit_tests_catch_a_changed_rule(tmp_path: Path, before: str, after: str) -> None:
    text = RULES.read_text()
    assert before in text
    (tmp_path / RULES.name).write_text(text.replace(before, after))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    result = promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert result.returncode != 0


REQUIRED = [
    "GpuUtilizationHigh",
    "GpuFramebufferNearlyFull",
    "GpuTemperatureHigh",
    "GpuPowerNearLimit",
    "GpuEccDoubleBitError",
    "GpuXidError",
    "GpuPcieThroughputCollapse",
    "GpuDeviceUnhealthy",
]


def test_the_required_alerts_exist_and_each_is_unit_tested() -> None:
    names = [rule["alert"] for rule in rules()]
    assert set(REQUIRED) <= set(names)
    tested = {
        t["alertname"] for case in yaml.safe_load(RULES_TEST.read_text())["tests"] for t in case["alert_rule_test"]
    }
    assert tested == set(names)


@pytest.mark.parametrize("rule", rules(), ids=[r["alert"] for r in rules()])
def test_every_alert_has_severity_summary_description_and_a_one_line_runbook(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in ("info", "warning", "critical")
    annotations = rule["annotations"]
    for key in ("summary", "description", "runbook"):
        assert annotations.get(key, "").strip(), key
    assert "\n" not in annotations["runbook"]


@pytest.mark.parametrize("rule", rules(), ids=[r["alert"] for r in rules()])
def test_every_alert_reads_only_metrics_the_exporter_or_the_plugin_serves(rule: dict[str, Any]) -> None:
    used = metric_names(rule["expr"])
    assert used
    assert used <= exporter_metric_names() | plugin_metric_names()


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('max without (a, b) (X{c="d,e"}) > 0', {"X"}),
        ("rate(A_total[5m]) / on (x) group_left B", {"A_total", "B"}),
        ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[1m])))", {"h_bucket"}),
        ("time() - T > 300 and U == 0", {"T", "U"}),
        ("X > 1e8 or Y < Inf", {"X", "Y"}),
    ],
    ids=["grouping-and-matchers", "vector-matching", "histogram", "function-without-args", "numbers"],
)
def test_metric_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_plugin_metrics_are_listed_in_the_readme() -> None:
    assert {"kubegpu_plugin_device_health", "kubegpu_plugin_rpc_duration_seconds_bucket"} <= plugin_metric_names()
