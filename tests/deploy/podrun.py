"""Rendered pods run as processes of this machine: the layout of their volumes on a temporary host root, their
containers' argv and environment as the pod would give them, and the kubelet emulator where a kubelet's sockets are.

Every hostPath volume is a directory under one temporary "host" root (so two DaemonSets mounting the same host path
share it), every mountPath in an arg or env value is rewritten to the host directory behind it, emptyDirs are fresh
directories, configMap volumes hold the rendered ConfigMap's keys and ``fieldRef: spec.nodeName`` is the node's
name (``metadata.namespace`` the workload's, ``metadata.name`` the pod's). A container path our programs use
without being told (NVIDIA's fixed ``/mps``) is given to them, when the container mounts it, through the env var
that moves it (:data:`FIXED_PATHS`). Used by the manifest-run and RBAC
tests; must not assert anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode

BIN = Path(sys.executable).parent
#: Container paths built into our programs -> the env var that moves them (for tests only).
FIXED_PATHS = {"/mps": "KUBEGPU_MPS_CONTAINER_ROOT"}
MACHINE = "dgx-a100"
NODE = "gpu-node-1"


@dataclass
class Pod:
    """One rendered pod template laid out on the temporary host."""

    workload: dict[str, Any]
    objects: list[dict[str, Any]]
    host: Path
    node_name: str
    mounts: dict[str, Path] = field(default_factory=dict)  # container mountPath -> directory here
    pod_name: str = ""  # what ``fieldRef: metadata.name`` gives; empty: <workload>-<node>

    def __post_init__(self) -> None:
        spec = self.workload["spec"]["template"]["spec"]
        self.volumes = {v["name"]: v for v in spec.get("volumes", [])}
        self.containers = {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}

    def _volume_dir(self, name: str) -> Path:
        volume = self.volumes[name]
        if "hostPath" in volume:
            path = self.host / volume["hostPath"]["path"].lstrip("/")
        elif "emptyDir" in volume:
            path = self.host / "pods" / self.workload["metadata"]["name"] / name
        elif "configMap" in volume:
            path = self.host / "pods" / self.workload["metadata"]["name"] / name
            data = next(
                o
                for o in self.objects
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
            )
            path.mkdir(parents=True, exist_ok=True)
            for key, text in data["data"].items():
                (path / key).write_text(text)
        else:
            raise AssertionError(f"volume kind not laid out by this test: {volume}")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _map(self, text: str, mounts: dict[str, Path]) -> str:
        flag, eq, value = text.partition("=") if text.startswith("--") else ("", "", text)
        for mount in sorted(mounts, key=len, reverse=True):
            if value == mount or value.startswith(mount + "/"):
                value = str(mounts[mount]) + value[len(mount) :]
                break
        return f"{flag}{eq}{value}"

    def command(self, name: str, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
        """argv and environment of container ``name`` as this machine runs it."""
        container = self.containers[name]
        mounts = {m["mountPath"]: self._volume_dir(m["name"]) for m in container.get("volumeMounts", [])}
        command = [*container["command"], *container.get("args", [])]
        argv = [str(BIN / command[0]), *(self._map(a, mounts) for a in command[1:])]
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEGPU_", "NODE_", "CONFIG_", "MIG_"))}
        for item in container.get("env", []):
            if "value" in item:
                environ[item["name"]] = self._map(item["value"], mounts)
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                environ[item["name"]] = self.node_name
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                environ[item["name"]] = self.workload["metadata"].get("namespace", "default")
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                environ[item["name"]] = self.pod_name or f"{self.workload['metadata']['name']}-{self.node_name}"
            else:
                raise AssertionError(f"env source not mapped by this test: {item}")
        for path, variable in FIXED_PATHS.items():
            if path in mounts:
                environ[variable] = str(mounts[path])
        environ.update(env or {})
        return argv, environ


@pytest.fixture
def host() -> Iterator[Path]:
    node = LocalNode(machine=MACHINE)
    root = node.root
    # The emulator's sockets where a kubelet's are: <host>/var/lib/kubelet/{device-plugins,pod-resources}.
    node.root = root / "var" / "lib" / "kubelet"
    try:
        node.start_kubelet()
        yield root
    finally:
        node.close()
        node.root = root
        node.close()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def start(
    procs: list[subprocess.Popen[bytes]], argv: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    procs.append(proc)
    return proc


def registered(host: Path) -> dict[str, Any]:
    from kubegpu.kubelet import client

    resources: dict[str, Any] = client.status(host / "var" / "lib" / "kubelet" / "device-plugins")["resources"]
    return resources


def daemonset(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == f"kubegpu-{component}")


def deployment(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == f"kubegpu-{component}")


def listen_here(argv: list[str], flag: str, port: int) -> list[str]:
    """argv with a container's ``--flag=HOST:PORT`` on a free loopback port of this machine instead."""
    return [f"{flag}=127.0.0.1:{port}" if a.startswith(f"{flag}=") else a for a in argv]


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET a path on a loopback port: (status, body), (0, "") while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""
