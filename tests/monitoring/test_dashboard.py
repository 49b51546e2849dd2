"""The Grafana dashboard in deploy/dashboards: every query parses and reads only metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.monitoring.promql import exporter_metric_names, metric_names, plugin_metric_names
from tests.monitoring.test_alert_rules import promtool

DASHBOARD = REPO / "deploy" / "dashboards" / "kubegpu-gpus.json"
# Grafana's variables, replaced by values Prometheus accepts so that the query itself can be checked.
_VARIABLES = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dashboard()["templating"]["list"]:
        if var["type"] == "query":
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["query"]["query"])
            assert match, var["name"]
            out.append((f"variable {var['name']}", match.group(1)))
    return out


def concrete(expr: str) -> str:
    for name, value in _VARIABLES.items():
        expr = expr.replace(name, value)
    return re.sub(r"\$\{?(\w+)\}?", r".*", expr)


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    rules = [{"record": f"dashboard:query_{i}", "expr": concrete(expr)} for i, (_, expr) in enumerate(queries())]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_query_would_fail_the_parse_check(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "d:q", "expr": "sum by (x (y)"}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0


@pytest.mark.parametrize(("where", "expr"), queries(), ids=[w for w, _ in queries()])
def test_every_query_reads_only_metrics_the_exporter_or_the_plugin_serves(where: str, expr: str) -> None:
    used = metric_names(concrete(expr))
    assert used, where
    assert used <= exporter_metric_names() | plugin_metric_names(), where


def test_the_dashboard_has_node_and_pod_sections_and_unique_ids() -> None:
    panels = dashboard()["panels"]
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows == ["Node: $node", "Pods"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    pod_panels = panels[[p["title"] for p in panels].index("Pods") + 1 :]
    assert pod_panels and all('pod=~"$pod"' in t["expr"] for p in pod_panels for t in p["targets"])
