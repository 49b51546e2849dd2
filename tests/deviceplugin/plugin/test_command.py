"""``kubegpu plugin`` as a real process against a fake kubelet: flags, signals, fault injection from the CLI."""

from __future__ import annotations

import asyncio
import json
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
from tests.polling import eventually

DEADLINE_S = 30.0
UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]


def kubegpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


BAD_INPUT = [
    ("unknown-machine", ["--machine", "no-such-machine"], "--machine 'no-such-machine'"),
    ("negative-quiet-period", ["--health-recovery-quiet-period", "-1"], "must be a finite number of seconds >= 0"),
    ("bad-retry", ["--registration-retry-interval", "soon"], 'time: invalid duration "soon"'),
    ("directory-socket", ["--kubelet-socket", "/tmp/dir/"], "needs the socket file's path"),
    ("unknown-flag", ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ("unknown-mig-strategy", ["--mig-strategy", "bogus"], "unable to validate flags: unknown MIG strategy: bogus"),
    (
        "bad-list-strategy",
        ["--device-list-strategy", "env"],
        "invalid --device-list-strategy option: invalid strategy: env",
    ),
    ("bad-metrics-listen", ["--metrics-listen", "nope"], "invalid --metrics-listen option: 'nope' is not HOST:PORT"),
    ("bad-policy", ["--allocation-policy", "spread"], "invalid --allocation-policy option: spread"),
    ("bad-bool", ["--pass-device-specs=maybe"], 'could not parse "maybe" as bool value'),
    (
        "socket-dir-not-a-directory",
        ["--socket-dir", "/dev/null"],
        "--socket-dir /dev/null: cannot create it: File exists",
    ),
    ("zero-retry-interval", ["--registration-retry-interval", "0"], "0s (must be within (0, 3600] seconds)"),
]


@pytest.mark.parametrize(("args", "message"), [r[1:] for r in BAD_INPUT], ids=[r[0] for r in BAD_INPUT])
def test_bad_input_exits_two_naming_the_problem(args: list[str], message: str) -> None:
    result = kubegpu("plugin", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


CONFIG_ERRORS = [
    ("typo", "sharing: {timeSlicing: {resources: [{name: gpu, replica: 4}]}}",
     "sharing.timeSlicing.resources[0].replica: unknown key"),
    ("one-replica", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}",
     "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
    ("mps-without-root", "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
     "unable to validate flags: using MPS requires --mps-root to be specified"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), [r[1:] for r in CONFIG_ERRORS], ids=[r[0] for r in CONFIG_ERRORS])
def test_a_bad_config_file_exits_two_in_one_line_naming_the_key_and_the_rule(
    text: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    for extra in ([], ["--print-config"]):
        result = kubegpu("plugin", "--config-file", str(path), "--machine", "dgx-a100", *extra)
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("kubegpu plugin: error: ") and message in line


def test_print_config_prints_the_effective_config_with_precedence_and_exits(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("flags: {migStrategy: single, plugin: {deviceIDStrategy: index, passDeviceSpecs: true}}")
    env = {**os.environ, "MIG_STRATEGY": "mixed", "CONFIG_FILE": str(path)}
    result = kubegpu("plugin", "--print-config", "--pass-device-specs=false", env=env)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    # flag > env > file > default
    assert printed["flags"]["plugin"]["passDeviceSpecs"] is False
    assert printed["flags"]["migStrategy"] == "mixed"
    assert printed["flags"]["plugin"]["deviceIDStrategy"] == "index"
    assert printed["flags"]["plugin"]["deviceListStrategy"] == ["envvar"]
    again = tmp_path / "again.json"
    again.write_text(result.stdout)
    assert json.loads(kubegpu("plugin", "--print-config", "--config-file", str(again)).stdout) == printed


#: NVIDIA's CommandLineFlags / PluginCommandLineFlags field order (api/config/v1/flags.go), which its JSON keeps.
NVIDIA_FLAG_KEYS = [
    "migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot", "gdrcopyEnabled", "gdsEnabled",
    "mofedEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin",
]  # fmt: skip
NVIDIA_PLUGIN_KEYS = [
    "passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix", "nvidiaCTKPath",
    "containerDriverRoot",
]  # fmt: skip


def test_print_config_has_nvidias_shape_and_no_gfd_block() -> None:
    result = kubegpu("plugin", "--print-config")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert list(printed) == ["version", "flags", "resources", "sharing", "imex"]
    assert list(printed["flags"]) == NVIDIA_FLAG_KEYS  # NVIDIA's plugin sets Flags.GFD = nil before logging
    # NVIDIA's keys first, in its order; kubegpu's own plugin settings after them.
    assert list(printed["flags"]["plugin"])[: len(NVIDIA_PLUGIN_KEYS)] == NVIDIA_PLUGIN_KEYS
    assert printed["resources"] == {"gpus": [{"pattern": "*", "name": "nvidia.com/gpu"}], "mig": []}


A100_80GB_MIXED = [  # go-nvlib's visit order: GPU-instance profile enums 1/2/3/4/7 slice, 1 slice +me, 1 slice rev 2
    "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.20gb",
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine", "profiles_"),
    [
        ("a100-mig", A100_80GB_MIXED),
        ("dgx-a100", A100_80GB_MIXED),  # MIG-capable GPUs offer their profiles with MIG disabled too
        ("hgx-h200", ["1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.35gb"]),
        ("pcie-4xt4", []),
    ],
    ids=["a100-mig", "a100-whole", "h200", "t4-no-mig"],
)
def test_print_config_under_mixed_lists_the_nodes_mig_profiles_in_nvidias_order(
    machine: str, profiles_: list[str], tmp_path: Path
) -> None:
    result = kubegpu("plugin", "--machine", machine, "--mig-strategy", "mixed", "--print-config")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["resources"]["mig"] == [
        {"pattern": p, "name": "nvidia.com/mig-" + p.replace("+", ".")} for p in profiles_
    ]
    again = tmp_path / "again.json"
    again.write_text(result.stdout)
    reprinted = kubegpu("plugin", "--machine", machine, "--print-config", "--config-file", str(again))
    assert json.loads(reprinted.stdout) == printed


def test_print_config_under_mixed_without_nvml_warns_and_lists_no_mig_resources() -> None:
    result = kubegpu("plugin", "--mig-strategy", "mixed", "--print-config")
    assert result.returncode == 0
    assert json.loads(result.stdout)["resources"]["mig"] == []
    assert result.stderr.startswith("kubegpu plugin: warning: mig-strategy=mixed: no MIG resources listed: ")
    assert result.stderr.count("\n") == 1


def test_help_lists_the_plugin_flags() -> None:
    result = kubegpu("plugin", "--help")
    assert result.returncode == 0
    for flag in (
        "--kubelet-socket",
        "--machine",
        "--fault-file",
        "--health-recovery-quiet-period",
        "--config-file",
        "--mig-strategy",
        "--device-list-strategy",
        "--fail-on-init-error",
        "--allocation-policy",
        "--metrics-listen",
        "--print-config",
    ):
        assert flag in result.stdout


def test_without_machine_and_without_nvml_it_exits_one_saying_why(sock_dir: Path) -> None:
    result = kubegpu("plugin", "--kubelet-socket", str(sock_dir / "kubelet.sock"))
    assert result.returncode == 1
    assert 'msg="cannot start"' in result.stderr
    assert "libnvidia-ml.so.1 not found; looked in: /driver-root/usr/lib64/libnvidia-ml.so.1" in result.stderr
    assert "--machine PROFILE" in result.stderr


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


def test_nvml_failing_with_fail_on_init_error_false_waits_saying_why_and_exits_zero_on_sigterm(
    sock_dir: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "kubegpu", "--log-format", "json", "plugin", "--fail-on-init-error=false"),
            *("--kubelet-socket", str(sock_dir / "kubelet.sock"), "--driver-root", str(sock_dir / "no-driver")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:  # until the plugin says it waits; a crash ends the loop
            lines.append(json.loads(line))
            if lines[-1]["msg"] == "No devices found. Waiting indefinitely.":
                break
        waiting = lines[-1]
        assert waiting["msg"] == "No devices found. Waiting indefinitely.", lines
        assert "libnvidia-ml.so.1 not found" in waiting["error"]
        assert str(sock_dir / "no-driver" / "usr/lib64/libnvidia-ml.so.1") in waiting["error"]
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_the_effective_config_is_logged_once_as_json_at_start(
    kubelet: FakeKubelet, spawn: Spawn, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 2}]}}")
    process = await spawn("--config-file", str(path))
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    assert entry.resource == "nvidia.com/gpu.shared"
    process.send_signal(signal.SIGTERM)
    code, stderr = await wait_exit(process)
    assert code == 0
    logged = [line for line in stderr.splitlines() if 'msg="running with config"' in line]
    assert len(logged) == 1
    config_json = json.loads(json.loads(logged[0].split(" config=", 1)[1]))
    assert config_json["sharing"]["timeSlicing"]["resources"][0]["rename"] == "nvidia.com/gpu.shared"


async def test_sighup_reads_the_config_file_again(kubelet: FakeKubelet, spawn: Spawn, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}")
    process = await spawn("--config-file", str(path))
    first = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(first, lambda h: len(h) == 16, DEADLINE_S)
    path.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 3}]}}")
    process.send_signal(signal.SIGHUP)
    second = await kubelet.wait_registrations(2, DEADLINE_S)
    await kubelet.wait_snapshot(second, lambda h: len(h) == 24, DEADLINE_S)
    process.send_signal(signal.SIGTERM)
    code, stderr = await wait_exit(process)
    assert code == 0
    assert stderr.count('msg="running with config"') == 2


async def test_a_missing_socket_dir_is_created_and_served(spawn: Spawn, sock_dir: Path) -> None:
    target = sock_dir / "not" / "yet"
    process = await spawn("--kubelet-socket", "", "--socket-dir", str(target), env={**os.environ})
    try:
        await eventually(lambda: (target / "nvidia-gpu.sock").exists(), within=DEADLINE_S, what="the plugin socket")
        assert (target.stat().st_mode & 0o777) == 0o750
    finally:
        process.send_signal(signal.SIGTERM)
        code, stderr = await wait_exit(process)
    assert code == 0, stderr
    assert "add_port" not in stderr
