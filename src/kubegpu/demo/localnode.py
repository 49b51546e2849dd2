"""A simulated GPU node made of real kubegpu processes in a temporary directory.

Owns starting, restarting and stopping ``kubegpu kubelet``, ``kubegpu plugin``
and ``kubegpu exporter`` as separate processes wired together (socket dir,
pod-resources socket, the machine's fault journal, log files, one environment),
running other commands beside them (a stub plugin, ``kubegpu kubelet status``),
waiting for what they log or report, and cleaning everything up. The demo, the
benchmarks and the end-to-end tests share it. Must not contain kubelet or plugin
logic: it only runs the real commands and reads what they answer.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
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

    Every process runs as ``python -m kubegpu ...`` (or another module, :meth:`spawn`) with its output in
    ``logs/<name>.log``. Starting never waits for the plugin to register: callers wait for the state they
    need with :meth:`wait_for` (the emulator's watch stream, or ``kubegpu kubelet status`` with ``cli=True``).

    Parameters:
        machine: simulated machine profile for the plugin and the exporter; None reads NVML (no
            ``--machine``, no fault journal: the GPUs, real or the fake library's, are in ``env``).
        root: directory to work in (a fresh short temp dir by default; unix socket paths are short).
        plugin_args, kubelet_args, exporter_args: extra arguments of each command.
        env: the processes' whole environment (None: this process's), e.g. ``LD_LIBRARY_PATH`` and
            ``KUBEGPU_FAKE_NVML_*`` for the fake NVML library.
    """

    machine: str | None = "dgx-a100"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kubegpu-", dir="/tmp")))
    plugin_args: list[str] = field(default_factory=list)
    kubelet_args: list[str] = field(default_factory=list)
    exporter_args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    exporter_port: int = 0

    @property
    def socket_dir(self) -> Path:
        return self.root / "device-plugins"

    @property
    def kubelet_socket(self) -> Path:
        return self.socket_dir / "kubelet.sock"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root / "pod-resources" / "kubelet.sock"

    @property
    def fault_file(self) -> Path:
        return self.root / "faults.jsonl"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def spawn(self, name: str, args: list[str], module: str = "kubegpu") -> subprocess.Popen[bytes]:
        """Start ``python -m module args`` as process ``name`` of this node, its output in ``logs/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
            )
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        """Everything process ``name`` wrote so far (every run of it); empty before it started."""
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_tail(self, name: str, lines: int = 15) -> str:
        text = self.log(name)
        return "\n".join(text.splitlines()[-lines:]) if text else "(no log)"

    def _logs(self) -> str:
        return "\n".join(f"--- {name} log ---\n{self.log_tail(name)}" for name in sorted(self.procs))

    # ----- processes -----------------------------------------------------------------------

    def _simulated(self) -> list[str]:
        return [] if self.machine is None else ["--machine", self.machine, "--fault-file", str(self.fault_file)]

    def start_kubelet(self, timeout: float = 30.0) -> subprocess.Popen[bytes]:
        """Start the emulator and wait until its control socket answers."""
        proc = self.spawn(
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
        return proc

    def start_plugin(self) -> subprocess.Popen[bytes]:
        """Start the device plugin (it registers on its own, when a kubelet is there); does not wait."""
        return self.spawn(
            "plugin", ["plugin", *self._simulated(), "--kubelet-socket", str(self.kubelet_socket), *self.plugin_args]
        )

    def start_exporter(self, collect_interval_ms: int = 500, timeout: float = 30.0) -> subprocess.Popen[bytes]:
        """Start the exporter with pod attribution and wait until ``/health`` answers."""
        self.exporter_port = free_port()
        proc = self.spawn(
            "exporter",
            [
                "exporter",
                *self._simulated(),
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
        return proc

    def wait_log(self, name: str, text: str, timeout: float = 30.0) -> str:
        """Block until process ``name`` logs a line containing ``text``; returns that line."""
        self._wait(name, lambda: text in self.log(name), timeout)
        return next(line for line in self.log(name).splitlines() if text in line)

    def _wait(self, name: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self.procs[name]
            with contextlib.suppress(Exception):
                if ready():
                    return
            if proc.poll() is not None:
                raise NodeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise NodeError(f"{name} did not become ready within {timeout:g} s:\n{self.log_tail(name)}")
            time.sleep(0.05)

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Signal process ``name`` and wait for it (killed after ``timeout``); its exit code, None if not started."""
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

    # ----- the emulator's state ------------------------------------------------------------

    def wait_for(
        self, predicate: Callable[[client.Status], bool], timeout: float = 20.0, *, cli: bool = False
    ) -> client.Status:
        """Block until the emulator's status satisfies ``predicate``; on timeout the error carries the logs.

        ``cli=True`` polls ``kubegpu kubelet status --json`` (for tests of the CLI) instead of the watch stream.
        """
        if not cli:
            try:
                return client.wait_for(predicate, self.socket_dir, timeout=timeout)
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}\n{self._logs()}") from None
        deadline = time.monotonic() + timeout
        last: client.Status = {}
        while True:
            with contextlib.suppress(NodeError):  # not answering yet (starting, restarting)
                last = self.cli_status()
                if predicate(last):
                    return last
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"status did not reach the expected state within {timeout:g} s; last: {last}\n{self._logs()}"
                )
            time.sleep(0.2)

    def status(self) -> client.Status:
        return client.status(self.socket_dir)

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``kubegpu ARGS`` to its end, as a user would, in the node's environment; output captured."""
        return subprocess.run(
            [sys.executable, "-m", "kubegpu", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self.env,
            stdin=subprocess.DEVNULL,
        )

    def cli_status(self) -> client.Status:
        """The emulator's status as ``kubegpu kubelet status --json`` prints it; NodeError when it fails."""
        done = self.cli("kubelet", "status", "--json", "--socket-dir", str(self.socket_dir))
        if done.returncode != 0:
            raise NodeError(f"kubegpu kubelet status exited with {done.returncode}: {done.stderr.strip()}")
        status: client.Status = json.loads(done.stdout)
        return status

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
        """Stop every process (the kubelet last, so plugins see it to the end) and remove the directory."""
        for name in [n for n in reversed(self.procs) if n != "kubelet"]:
            self.stop(name)
        self.stop("kubelet")
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
