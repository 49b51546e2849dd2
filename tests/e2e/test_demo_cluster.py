"""``kubegpu demo cluster`` against an API server: where everything landed, and the one line without a server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lightkube.resources.core_v1 import Namespace, Node

from tests.kubeapi.fixture import KubeEnv


@pytest.mark.live_scheduler
@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_the_cluster_demo_places_every_kind_of_pod_and_leaves_nothing_behind(kube: KubeEnv) -> None:
    client = kube.client()
    nodes_before = {n.metadata.name for n in client.list(Node) if n.metadata}
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "cluster", "--kubeconfig", str(kube.kubeconfig), "--json"],
        capture_output=True,
        text=True,
        timeout=230,
        stdin=subprocess.DEVNULL,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events and events[-1]["event"] == "summary", (done.stdout[-3000:], done.stderr[-3000:])
    assert events[-1]["ok"] is True, (events[-1], done.stderr[-3000:])
    assert done.returncode == 0

    (nodes,) = [e["nodes"] for e in events if e["event"] == "nodes"]
    shared = {n["node"] for n in nodes if n["resource"] == "nvidia.com/gpu.shared"}
    whole = {n["node"] for n in nodes if n["resource"] == "nvidia.com/gpu"}
    assert len(whole) == 2 and len(shared) == 1
    assert {n["product"] for n in nodes} == {"NVIDIA-A100-SXM4-80GB"}  # GFD's label, from kubegpu labels
    (placed,) = [{p["pod"]: p for p in e["pods"]} for e in events if e["event"] == "placement"]
    urgent = placed["urgent-8gpu"]
    assert urgent["status"] == "Running" and urgent["node"] in whole
    assert len(set(urgent["devices"]["main"])) == 8
    for name in ("notebook-a", "notebook-b", "notebook-c"):
        assert placed[name]["status"] == "Running" and placed[name]["node"] in shared
    gang = [placed[f"gang-{i}"] for i in range(4)]
    # All or nothing: either the whole gang runs or the preemptor took it down.
    assert len({p["status"] for p in gang}) == 1
    assert any(p["status"] == "evicted (preempted)" for p in placed.values())
    for p in placed.values():
        if p["status"] == "Running" and p["kind"] in ("whole GPU", "multi-GPU"):
            assert len(p["devices"]["main"]) == int(p["asks"].split()[0])

    # Nothing of the run is left: its nodes are gone, its namespace is gone or going (a real cluster takes a while).
    (run,) = [e["run"] for e in events if e["event"] == "api"]
    assert {n.metadata.name for n in client.list(Node) if n.metadata} == nodes_before
    left = [ns for ns in client.list(Namespace) if ns.metadata and ns.metadata.name == run]
    assert all(ns.status and ns.status.phase == "Terminating" for ns in left)


def test_without_an_api_server_it_says_in_one_line_what_it_needs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "cluster"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "kubegpu demo cluster: needs a Kubernetes API server: pass --kubeconfig FILE (or set KUBECONFIG)"
    )


def test_an_api_server_that_does_not_answer_is_one_line_and_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "demo", "cluster", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "the API server at http://127.0.0.1:9 does not answer" in done.stderr
