"""A simulated GPU node made of real kubegpu processes in a temporary directory.

Owns starting, restarting and stopping ``kubegpu kubelet``, ``kubegpu plugin``
and ``kubegpu exporter`` as separate processes wired together (socket dir,
pod-resources socket, the machine's fault journal, log files), and cleaning
everything up. The demo, the node benchmarks and the end-to-end tests share it.
Must not contain kubelet or plugin logic: it only runs the real commands.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kubegpu.gpu import faults
from kubegpu.kubelet import client


class NodeError(RuntimeError):
    """A process of the local node did not start or answer; the message carries its log tail."""


def free_port() -> int:
    """A TCP port on loopback that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LocalNode:
    """Paths and processes of one local node. Use as a context manager; ``close()`` leaves nothing behind.

    Parameters:
        machine: simulated machine profile for the plugin and the exporter.
        root: directory to work in (a fresh short temp dir by default; unix socket paths are short).
        plugin_args: extra ``kubegpu plugin`` arguments.
        kubelet_args: extra ``kubegpu kubelet`` arguments.
    """

    machine: str = "dgx-a100"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kubegpu-", dir="/tmp")))
    plugin_args: list[str] = field(default_factory=list)
    kubelet_args: list[str] = field(default_factory=list)
    exporter_args: list[str] = field(default_factory=list)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    exporter_port: int = 0

    @property
    def socket_dir(self) -> Path:
        return self.root / "device-plugins"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root / "pod-resources" / "kubelet.sock"

    @property
    def fault_file(self) -> Path:
        return self.root / "faults.jsonl"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubegpu", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.procs[name] = proc
        return proc

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # ----- processes -----------------------------------------------------------------------

    def start_kubelet(self, timeout: float = 20.0) -> None:
        """Start the emulator and wait until its control socket answers."""
        self._spawn(
            "kubelet",
            [
                "kubelet",
                "--socket-dir",
                str(self.socket_dir),
                "--pod-resources-socket",
                str(self.pod_resources_socket),
                *self.kubelet_args,
            ],
        )
        self._wait("kubelet", lambda: bool(client.ping(self.socket_dir, timeout=1.0)), timeout)

    def start_plugin(self) -> None:
        """Start the device plugin on the simulated machine (it registers on its own)."""
        self._spawn(
            "plugin",
            [
                "plugin",
                "--machine",
                self.machine,
                "--kubelet-socket",
                str(self.socket_dir / "kubelet.sock"),
                "--fault-file",
                str(self.fault_file),
                *self.plugin_args,
            ],
        )

    def start_exporter(self, collect_interval_ms: int = 500, timeout: float = 20.0) -> None:
        """Start the exporter with pod attribution and wait until ``/health`` answers."""
        self.exporter_port = free_port()
        self._spawn(
            "exporter",
            [
                "exporter",
                "--machine",
                self.machine,
                "--fault-file",
                str(self.fault_file),
                "--listen",
                f"127.0.0.1:{self.exporter_port}",
                "--pod-resources-socket",
                str(self.pod_resources_socket),
                "--collect-interval",
                str(collect_interval_ms),
                *self.exporter_args,
            ],
        )
        self._wait("exporter", lambda: bool(self.http_get("/health", timeout=1.0)), timeout)

    def _wait(self, name: str, ready: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise NodeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise NodeError(f"{name} did not become ready within {timeout:g} s:\n{self.log_tail(name)}")
            time.sleep(0.05)

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Signal process ``name`` and wait for it; returns its exit code (None if it was not running)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    # ----- helpers -------------------------------------------------------------------------

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> client.Status:
        """Block until the emulator's status satisfies ``predicate``; on timeout the error carries the logs."""
        try:
            return client.wait_for(predicate, self.socket_dir, timeout=timeout)
        except TimeoutError as exc:
            logs = "\n".join(f"--- {name} log ---\n{self.log_tail(name)}" for name in sorted(self.procs))
            raise TimeoutError(f"{exc}\n{logs}") from None

    def status(self) -> client.Status:
        return client.status(self.socket_dir)

    def admit(self, pod: dict[str, Any]) -> dict[str, Any]:
        return client.admit(pod, self.socket_dir)

    def delete(self, target: str) -> dict[str, Any]:
        return client.delete(target, self.socket_dir)

    def inject(self, fault: faults.Fault) -> None:
        faults.append(self.fault_file, fault)

    def http_get(self, path: str, timeout: float = 5.0) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.exporter_port}{path}", timeout=timeout) as response:
            text: str = response.read().decode()
            return text

    def close(self) -> None:
        """Stop every process (exporter, plugin, kubelet) and remove the directory."""
        for name in ("exporter", "plugin", "kubelet"):
            self.stop(name)
        for name in list(self.procs):
            self.stop(name)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalNode:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def pod_manifest(
    name: str,
    gpus: int,
    *,
    namespace: str = "demo",
    init_gpus: int = 0,
    resource: str = "nvidia.com/gpu",
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
) -> dict[str, Any]:
    """A real Pod manifest (as the API server would hold it) asking ``gpus`` of ``resource``."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": {"limits": {resource: gpus}}}],
        "restartPolicy": "Never",
    }
    if init_gpus:
        spec["initContainers"] = [{"name": "warmup", "image": image, "resources": {"limits": {resource: init_gpus}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": spec,
    }
