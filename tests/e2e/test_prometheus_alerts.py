"""A real Prometheus scrapes a running ``kubegpu exporter`` and raises GpuXidError after an injected XID.

Prometheus (Debian package ``prometheus``) runs on loopback with a temporary config: 1 s scrape and
evaluation intervals and the shipped rules with every ``for:`` shortened to 3 s, so that the alert is
seen pending and then firing through the HTTP API within seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubegpu.demo.localnode import free_port
from tests.conftest import REPO
from tests.monitoring.exporter_process import ExporterProcess, fault, get
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

RULES = REPO / "deploy" / "alerts" / "kubegpu-rules.yaml"
SHORT_FOR = "3s"


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    status, _, body = get(url)
    assert status == 200, body
    data = json.loads(body)
    assert data["status"] == "success", data
    return data["data"]


@pytest.fixture
def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.skip("prometheus is not installed (Debian package 'prometheus'; .ci/run installs it)")
    return path


class Prometheus:
    def __init__(self, binary: str, workdir: Path, target: str) -> None:
        rules = yaml.safe_load(RULES.read_text())
        for group in rules["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                rule["for"] = SHORT_FOR
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
            "rule_files": [str(workdir / "rules.yaml")],
            "scrape_configs": [{"job_name": "kubegpu-exporter", "static_configs": [{"targets": [target]}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}")
        try:
            return get(self.url + "/-/ready")[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "faults.jsonl"


@pytest.fixture
def exporter(journal: Path) -> Iterator[ExporterProcess]:
    args = ["--machine", "dgx-a100", "--fault-file", str(journal), "--collect-interval", "200"]
    with ExporterProcess(args) as process:
        yield process


@pytest.fixture
def prometheus(prometheus_binary: str, tmp_path: Path, exporter: ExporterProcess) -> Iterator[Prometheus]:
    server = Prometheus(prometheus_binary, tmp_path, f"127.0.0.1:{exporter.port}")
    try:
        wait_until(server.ready, within=30, what="prometheus ready")
        yield server
    finally:
        server.stop()


def xid_alerts(prometheus: Prometheus) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = api(prometheus.url, "/api/v1/alerts")["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == "GpuXidError"]


def test_an_injected_xid_goes_pending_then_firing_in_prometheus(
    prometheus: Prometheus, exporter: ExporterProcess, journal: Path
) -> None:
    def scraped() -> bool:
        result = api(prometheus.url, "/api/v1/query", query='count(DCGM_FI_DEV_XID_ERRORS{job="kubegpu-exporter"})')
        return bool(result["result"]) and result["result"][0]["value"][1] == "8"

    wait_until(scraped, within=20, what="all 8 GPUs' XID series in prometheus")
    assert xid_alerts(prometheus) == []

    fault(journal, "xid", "--machine", "dgx-a100", "--gpu", "2", "--xid", "79")
    seen: list[str] = []

    def fired() -> bool:
        for alert in xid_alerts(prometheus):
            if not seen or seen[-1] != alert["state"]:
                seen.append(alert["state"])
        return "firing" in seen

    wait_until(fired, within=30, what="the XID alert pending, then firing", interval=0.1)
    assert seen == ["pending", "firing"]

    (alert,) = xid_alerts(prometheus)
    assert alert["labels"]["gpu"] == "2"
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["instance"] == f"127.0.0.1:{exporter.port}"
    assert "pod" not in alert["labels"]
    assert alert["annotations"]["summary"].endswith("reported XID 79")
    assert float(alert["value"]) == 79
