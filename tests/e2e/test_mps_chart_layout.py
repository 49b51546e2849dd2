"""End to end, MPS in the layout of NVIDIA's chart: the host's MPS root bound at one container path for the plugin
and the MPS daemon, two separate processes that share nothing but that directory.

The host directory stands for ``MPS_ROOT`` (``/run/nvidia/mps``), the container path for NVIDIA's fixed ``/mps``
(moved under the test's directory with ``--mps-container-root``: a test cannot create ``/mps``). Each "container"
is a private mount namespace (``unshare -rm``) with the host directory bind-mounted at the container path, as
the kubelet's hostPath volume does, and the host side hidden under an empty tmpfs, so a process that used the
host path itself would find nothing; where unshare is not allowed, the container path is a symlink to the host
directory instead (the same sharing, without the isolation). The daemon runs the fake ``nvidia-cuda-mps-control``
(:mod:`tests.deviceplugin.fixtures.fake_mps_control`), which serves its control pipe like the real one; a "client
container" gets the Allocate answer's mounts and env and must reach the daemon through them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode, pod_manifest
from tests.deviceplugin.fixtures import fake_mps_control
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

#: Generous: CI has two slow cores and runs many processes at once.
DEADLINE_S = 60.0
BIN = Path(sys.executable).parent
RESOURCE = "nvidia.com/gpu"
CONFIG = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"


def _namespaces_work(scratch: Path) -> bool:
    """Whether this machine lets us do what a "container" below does: a bind mount and a tmpfs, unprivileged."""
    (scratch / "source").mkdir(parents=True)
    probe = f"mkdir -p {scratch / 'target'} && mount --bind {scratch / 'source'} {scratch / 'target'}"
    probe += f" && mount -t tmpfs probe {scratch / 'source'}"
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass
class Layout:
    """The host directory, the container path, and how a process is put into a "container" with it."""

    host: Path
    container: Path
    namespaces: bool
    #: Hidden in every container (an empty tmpfs over it): the host side is reachable through the binds only.
    hidden: Path

    def argv(self, command: list[str], binds: list[tuple[str, str]] | None = None) -> list[str]:
        """``command`` with ``binds`` (host path, container path; default: the MPS root) mounted for it alone."""
        if not self.namespaces:
            return command
        binds = [(str(self.host), str(self.container))] if binds is None else binds
        steps = [f"mkdir -p {shlex.quote(c)} && mount --bind {shlex.quote(h)} {shlex.quote(c)}" for h, c in binds]
        steps.append(f"mount -t tmpfs hidden {shlex.quote(str(self.hidden))}")
        return ["unshare", "-rm", "sh", "-c", " && ".join([*steps, "exec " + shlex.join(command)])]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    host = tmp_path / "host" / "run" / "nvidia" / "mps"
    host.mkdir(parents=True)
    container = tmp_path / "ctr" / "mps"
    namespaces = _namespaces_work(tmp_path / "probe")
    if not namespaces:
        container.parent.mkdir(parents=True)
        container.symlink_to(host, target_is_directory=True)
    return Layout(host, container, namespaces, hidden=tmp_path / "host")


@pytest.fixture
def node() -> Iterator[LocalNode]:
    running = LocalNode(machine="pcie-4xt4")
    try:
        yield running
    finally:
        running.close()


def spawn(node: LocalNode, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A process of ``node`` (stopped by its ``close``), its output in ``logs/<name>.log``."""
    node.log_dir.mkdir(parents=True, exist_ok=True)
    with (node.log_dir / f"{name}.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    node.procs[name] = proc
    return proc


def allocatable(node: LocalNode, count: int) -> None:
    def reached(status: dict[str, Any]) -> bool:
        resource = status.get("resources", {}).get(RESOURCE)
        return resource is not None and resource["capacity"] == 8 and resource["allocatable"] == count

    try:
        node.wait_for(reached, timeout=DEADLINE_S)
    except TimeoutError as exc:
        logs = "\n".join(f"--- {n}\n{node.log_tail(n, 20)}" for n in ("plugin", "mps-daemon"))
        raise AssertionError(f"{exc}\n{logs}") from None


def stop_fake_servers(layout: Layout) -> None:
    for pid_file in layout.host.glob(f"*/*/pipe/{fake_mps_control.PID_FILE}"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):  # gone meanwhile
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_client_container_reaches_the_daemon_through_the_allocate_mounts_and_loses_it_when_it_stops(
    layout: Layout, node: LocalNode, tmp_path: Path
) -> None:
    control_program = fake_mps_control.install(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    # The plugin finds nvidia-cuda-mps-control on PATH, as NVIDIA's plugin does (its image has the driver's).
    env = {**os.environ, "PATH": f"{control_program.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("MPS_ROOT", None)
    root_flag = ["--mps-container-root", str(layout.container)]
    node.start_kubelet()
    plugin = [
        *(sys.executable, "-m", "kubegpu", "plugin", "--machine", "pcie-4xt4", "--fault-file", str(node.fault_file)),
        *("--kubelet-socket", str(node.kubelet_socket), "--config-file", str(config)),
        *("--mps-root", str(layout.host), *root_flag, "--mps-check-interval", "0.5"),
    ]
    spawn(node, "plugin", layout.argv(plugin), env)
    # The MPS pod: its init container makes the shm tmpfs, then the daemon (NVIDIA's chart sets no MPS_ROOT here).
    if layout.namespaces:
        shm = subprocess.run(
            layout.argv([str(BIN / "mps-control-daemon"), "mount-shm", *root_flag]),
            capture_output=True, text=True, timeout=DEADLINE_S, env=env, check=False,
        )  # fmt: skip
        assert shm.returncode == 0, shm.stderr
        assert f"mounted tmpfs at {layout.container / 'shm'}" in shm.stdout
    else:
        (layout.host / "shm").mkdir()  # what mount-shm leaves on the host, without the privilege to mount
    daemon = [
        *(sys.executable, "-m", "kubegpu", "mps-daemon", "--machine", "pcie-4xt4", "--config-file", str(config)),
        *(*root_flag, "--control-program", str(control_program), "--nvidia-smi", ""),
    ]
    mps = spawn(node, "mps-daemon", layout.argv(daemon), env)
    try:
        allocatable(node, 8)
        (container,) = node.admit(pod_manifest("mps-client", 1))["containers"].values()

        # NVIDIA's answer, field by field: the pipe directory at its container path, pipe and shm mounted.
        pipe = layout.container / RESOURCE / "pipe"
        assert {k: v for k, v in container["envs"].items() if k.startswith("CUDA_MPS_")} == {
            "CUDA_MPS_PIPE_DIRECTORY": str(pipe)
        }
        mounts = [(m["container_path"], m["host_path"], m.get("read_only", False)) for m in container["mounts"]]
        assert mounts == [
            (str(pipe), str(layout.host / RESOURCE / "pipe"), False),
            ("/dev/shm", str(layout.host / "shm"), False),
        ]
        # The host side of every mount exists: the daemon wrote through its bind, mount-shm made the shm dir.
        for _, host_path, _ in mounts:
            assert Path(host_path).is_dir(), host_path
        assert (layout.host / ".ready").exists() and (layout.host / RESOURCE / ".started").exists()
        assert (layout.host / RESOURCE / "pipe" / fake_mps_control.CONTROL).is_fifo()
        assert (layout.host / RESOURCE / "log" / "control.log").exists()
        if layout.namespaces:
            assert list(layout.container.iterdir()) == []  # nothing was written at the container path itself

        # The client container: the Allocate mounts and env, and the control program (the driver's, in real life).
        client_env = {**env, **container["envs"]}
        script = f"echo get_default_active_thread_percentage | {shlex.quote(str(control_program))}"
        if layout.namespaces:
            script += " && touch /dev/shm/from-the-client"
        binds = [(host, ctr) for ctr, host, _ in mounts]
        asked = subprocess.run(
            layout.argv(["sh", "-c", script], binds),
            capture_output=True, text=True, timeout=DEADLINE_S, env=client_env, check=False,
        )  # fmt: skip
        assert (asked.returncode, asked.stdout.strip()) == (0, "50.0"), asked.stderr
        if layout.namespaces:
            assert (layout.host / "shm" / "from-the-client").exists()  # /dev/shm is the host's <root>/shm

        # The daemon dies without cleaning up: the pipe no longer answers, the replicas are Unhealthy.
        stop_fake_servers(layout)
        allocatable(node, 0)
        assert 'msg="MPS daemon down, devices unhealthy"' in node.log("plugin")
        # SIGHUP restarts the daemons: healthy again, with no plugin restart and no new registration.
        mps.send_signal(signal.SIGHUP)
        allocatable(node, 8)
        assert 'msg="MPS daemon back, devices healthy"' in node.log("plugin")
        # SIGTERM stops them cleanly (.ready removed): Unhealthy again.
        assert node.stop("mps-daemon", signal.SIGTERM, timeout=DEADLINE_S) == 0
        allocatable(node, 0)
        wait_until(lambda: not (layout.host / ".ready").exists(), within=DEADLINE_S, what=".ready removed")
        assert len(re.findall(r"\bmsg=registered\b", node.log("plugin"))) == 1
    finally:
        stop_fake_servers(layout)
