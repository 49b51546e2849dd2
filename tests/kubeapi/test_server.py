"""The server as a process-level thing: start/stop, its kubeconfig, discovery, health, other processes using it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Namespace

from tests.kubeapi import KubeApiServer
from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def test_a_server_serves_its_kubeconfig_and_frees_its_port_when_stopped(tmp_path: Path) -> None:
    # start/stop time is measured in bench/kubeapi.py, not asserted here
    with KubeApiServer(tmp_path / "kubeconfig") as server:
        port = server.port
        assert port > 0
        names = [ns.metadata.name for ns in Client(config=KubeConfig.from_file(server.kubeconfig)).list(Namespace)]
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= set(names)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def test_kubeconfig_has_the_standard_shape_and_lightkube_loads_it(kube: KubeEnv) -> None:
    doc = yaml.safe_load(kube.kubeconfig.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Config"
    current = doc["current-context"]
    context = next(c["context"] for c in doc["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    assert cluster["server"].startswith(("http://", "https://"))
    assert any(u["name"] == context["user"] for u in doc["users"])
    single = KubeConfig.from_file(kube.kubeconfig).get()
    assert single.cluster.server == cluster["server"]


def test_a_separate_process_reaches_the_server_through_the_kubeconfig(kube: KubeEnv) -> None:
    code = (
        "import sys; from lightkube import Client, KubeConfig; from lightkube.resources.core_v1 import Namespace;"
        "c = Client(config=KubeConfig.from_file(sys.argv[1]));"
        "print(c.get(Namespace, sys.argv[2]).metadata.name)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(kube.kubeconfig), kube.namespace],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == kube.namespace


def test_discovery_lists_core_and_group_kinds_with_subresources(kube: KubeEnv) -> None:
    http = kube.http()
    version = http.get("/version").json()
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")
    assert "v1" in http.get("/api").json()["versions"]
    core = {r["name"]: r for r in http.get("/api/v1").json()["resources"]}
    for name in (
        "pods",
        "pods/status",
        "pods/binding",
        "pods/eviction",
        "nodes",
        "nodes/status",
        "namespaces",
        "events",
    ):
        assert name in core, name
    assert core["pods"]["namespaced"] and not core["nodes"]["namespaced"]
    assert "watch" in core["pods"]["verbs"]
    groups = {g["name"]: g for g in http.get("/apis").json()["groups"]}
    for group in ("scheduling.k8s.io", "policy", "coordination.k8s.io", "apiextensions.k8s.io", "events.k8s.io"):
        assert group in groups, group
        version = groups[group]["preferredVersion"]["groupVersion"]
        assert http.get(f"/apis/{version}").status_code == 200
    leases = {r["name"] for r in http.get("/apis/coordination.k8s.io/v1").json()["resources"]}
    assert "leases" in leases


def test_health_endpoints_answer_ok(kube: KubeEnv) -> None:
    http = kube.http()
    for path in ("/healthz", "/readyz", "/livez"):
        answer = http.get(path)
        assert answer.status_code == 200 and answer.text == "ok"


def test_an_unknown_path_is_a_404_status(kube: KubeEnv) -> None:
    answer = kube.http().get("/api/v1/nosuchthings")
    assert answer.status_code == 404
    assert answer.json()["kind"] == "Status" and answer.json()["reason"] == "NotFound"


def test_the_server_runs_as_a_process_of_its_own_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal

    from tests.conftest import REPO
    from tests.polling import wait_until

    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.kubeapi", "--kubeconfig", str(kubeconfig)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("serving http://127.0.0.1:")
        client = Client(config=KubeConfig.from_file(kubeconfig))
        assert client.get(Namespace, "kube-system").metadata.name == "kube-system"
        process.send_signal(signal.SIGTERM)
        wait_until(lambda: process.poll() is not None, within=20, what="the server process to exit")
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_server_process_refuses_a_kubeconfig_in_a_missing_directory(tmp_path: Path) -> None:
    from tests.conftest import REPO

    done = subprocess.run(
        [sys.executable, "-m", "tests.kubeapi", "--kubeconfig", str(tmp_path / "no" / "kc")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"--kubeconfig: directory {tmp_path / 'no'} does not exist"


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("PUT", "/api/v1/namespaces/{ns}/configmaps", b"{}", 405),
        ("POST", "/api/v1/namespaces/{ns}/configmaps/x", b"{}", 405),
        ("GET", "/api/v1/namespaces/{ns}/configmaps?labelSelector=a%20b%20c", b"", 400),
        ("GET", "/api/v1/namespaces/{ns}/pods?fieldSelector=spec.bogus=1", b"", 400),
        ("GET", "/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=abc", b"", 400),
        ("POST", "/api/v1/namespaces/{ns}/configmaps", b"[1,2]", 400),
        ("POST", "/api/v1/namespaces/{ns}/configmaps", b'{"metadata": 5}', 400),
        ("GET", "/apis/no.such.group/v1/things", b"", 404),
        ("GET", "/api/v1/namespaces/{ns}/configmaps/x/status", b"", 404),
        ("GET", "/api/v1/namespaces/{ns}/configmaps?limit=lots", b"", 400),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_requests_get_a_status_answer_and_the_server_keeps_serving(
    kube: KubeEnv, method: str, path: str, body: bytes, code: int
) -> None:
    http = kube.http()
    answer = http.request(
        method, path.format(ns=kube.namespace), content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == code
    assert answer.json()["kind"] == "Status"
    assert http.get(f"/api/v1/namespaces/{kube.namespace}").status_code == 200
