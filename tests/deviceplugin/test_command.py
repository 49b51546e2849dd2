"""``kubegpu plugin`` as a real process against a fake kubelet: flags, signals, fault injection from the CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from kubegpu.gpu import profiles
from tests.deviceplugin.fake_kubelet import FakeKubelet

DEADLINE_S = 30.0
UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]


def kubegpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--machine", "no-such-machine"], "--machine 'no-such-machine'"),
        (["--health-recovery-quiet-period", "-1"], "--health-recovery-quiet-period must be a finite number"),
        (["--registration-retry-interval", "soon"], "--registration-retry-interval needs a number of seconds"),
        (["--kubelet-socket", ""], "--kubelet-socket (KUBELET_SOCKET) must not be empty"),
        (["--kubelet-socket", "/tmp/dir/"], "needs the socket file's path"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
    ids=["unknown-machine", "negative-quiet-period", "bad-retry", "empty-socket", "directory-socket", "unknown-flag"],
)
def test_bad_input_exits_two_naming_the_problem(args: list[str], message: str) -> None:
    result = kubegpu("plugin", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_help_lists_the_plugin_flags() -> None:
    result = kubegpu("plugin", "--help")
    assert result.returncode == 0
    for flag in ("--kubelet-socket", "--machine", "--fault-file", "--health-recovery-quiet-period"):
        assert flag in result.stdout


def test_without_machine_and_without_nvml_it_exits_one_saying_why(sock_dir: Path) -> None:
    result = kubegpu("plugin", "--kubelet-socket", str(sock_dir / "kubelet.sock"))
    assert result.returncode == 1
    assert 'msg="cannot start"' in result.stderr
    assert "nvml" in result.stderr.lower() and "--machine PROFILE" in result.stderr


Spawn = Callable[..., Coroutine[Any, Any, asyncio.subprocess.Process]]


@pytest.fixture
async def spawn(sock_dir: Path, fault_file: Path) -> AsyncIterator[Spawn]:
    processes: list[asyncio.subprocess.Process] = []

    async def launch(*extra: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
        args = ["--machine", "dgx-a100", "--fault-file", str(fault_file), *extra]
        if env is None:
            args += ["--kubelet-socket", str(sock_dir / "kubelet.sock")]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kubegpu",
            "plugin",
            *args,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        processes.append(process)
        return process

    yield launch
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def wait_exit(process: asyncio.subprocess.Process) -> tuple[int, str]:
    _, stderr = await asyncio.wait_for(process.communicate(), DEADLINE_S)
    assert process.returncode is not None
    return process.returncode, stderr.decode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_sigterm_and_sigint_exit_zero_with_the_socket_removed(
    sock_dir: Path, kubelet: FakeKubelet, spawn: Spawn, sig: signal.Signals
) -> None:
    process = await spawn()
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 8)
    process.send_signal(sig)
    code, stderr = await wait_exit(process)
    assert code == 0, stderr
    assert not (sock_dir / "nvidia-gpu.sock").exists()
    assert entry.ended.is_set() or await asyncio.wait_for(entry.ended.wait(), DEADLINE_S)
    assert "msg=stopped" in stderr


async def test_sighup_restarts_ending_the_old_stream_before_registering_again(
    kubelet: FakeKubelet, spawn: Spawn
) -> None:
    process = await spawn()
    first = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(first, lambda h: len(h) == 8)
    process.send_signal(signal.SIGHUP)
    second = await kubelet.wait_registrations(2, DEADLINE_S)
    assert kubelet.log == [
        ("register", "nvidia.com/gpu"),
        ("stream-ended", "nvidia.com/gpu"),
        ("register", "nvidia.com/gpu"),
    ]
    await kubelet.wait_snapshot(second, lambda h: len(h) == 8)
    assert process.returncode is None
    process.send_signal(signal.SIGTERM)
    code, stderr = await wait_exit(process)
    assert code == 0
    assert "reason=SIGHUP" in stderr


async def test_the_kubelet_socket_can_come_from_the_environment(
    sock_dir: Path, kubelet: FakeKubelet, spawn: Spawn
) -> None:
    process = await spawn(env={**os.environ, "KUBELET_SOCKET": str(sock_dir / "kubelet.sock")})
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    assert entry.request.endpoint == "nvidia-gpu.sock"
    process.send_signal(signal.SIGTERM)
    assert (await wait_exit(process))[0] == 0


async def test_faults_from_the_fault_cli_reach_the_kubelet_and_recovery_heals(
    kubelet: FakeKubelet, spawn: Spawn, fault_file: Path
) -> None:
    process = await spawn()
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 8)
    ff = ["--machine", "dgx-a100", "--fault-file", str(fault_file)]
    injected = await asyncio.to_thread(kubegpu, "fault", "xid", *ff, "--gpu", "3", "--xid", "79")
    assert injected.returncode == 0, injected.stderr
    health = await kubelet.wait_snapshot(entry, lambda h: h[UUIDS[3]] == "Unhealthy", DEADLINE_S)
    assert [i for i, v in health.items() if v == "Unhealthy"] == [UUIDS[3]]
    lost = await asyncio.to_thread(kubegpu, "fault", "lost", *ff, "--gpu", "6")
    assert lost.returncode == 0
    await kubelet.wait_snapshot(entry, lambda h: h[UUIDS[6]] == "Unhealthy", DEADLINE_S)
    for gpu in ("3", "6"):
        assert (await asyncio.to_thread(kubegpu, "fault", "recover", *ff, "--gpu", gpu)).returncode == 0
    await kubelet.wait_snapshot(entry, lambda h: set(h.values()) == {"Healthy"}, DEADLINE_S)
    process.send_signal(signal.SIGTERM)
    code, stderr = await wait_exit(process)
    assert code == 0
    assert (
        'msg="device unhealthy"' in stderr and "xid=79" in stderr and 'meaning="GPU has fallen off the bus"' in stderr
    )
