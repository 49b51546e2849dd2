"""MPS control daemons: the plan, the daemon against a fake control program, and ``kubegpu mps-daemon``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubegpu.deviceplugin.mps import control, sharing
from kubegpu.deviceplugin.rm import resource_map
from tests.deviceplugin.fixtures import fake_mps, fake_mps_control
from tests.deviceplugin.fixtures.build import plugin_config, profile
from tests.polling import wait_until


@pytest.fixture
def fakes(tmp_path: Path) -> dict[str, Path]:
    """Fake control program and nvidia-smi, and the file they record calls in."""
    return fake_mps.install(tmp_path)


def calls(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def plans(machine: str, text: str, root: Path, argv: Sequence[str] = ()) -> list[sharing.DaemonPlan]:
    m = profile(machine)
    cfg = plugin_config(["--mps-root", str(root), *argv], text=text)
    return sharing.daemons(resource_map.build(m, cfg), m, root)


PLANS = [
    ("four_replicas_on_a100", "dgx-a100", "sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}",
     "nvidia.com/gpu", list(range(8)), "20480M", 25),
    ("three_replicas_round_down", "dgx-a100", "sharing: {mps: {resources: [{name: gpu, replicas: 3}]}}",
     "nvidia.com/gpu", list(range(8)), "27306M", 33),
    ("t4_at_the_client_limit", "pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 48}]}}",
     "nvidia.com/gpu", [0, 1, 2, 3], "320M", 2),
    ("renamed_resource", "pcie-4xt4",
     "sharing: {mps: {renameByDefault: true, resources: [{name: gpu, replicas: 2}]}}",
     "nvidia.com/gpu.shared", [0, 1, 2, 3], "7680M", 50),
    ("only_the_selected_gpus", "dgx-a100",
     "sharing: {mps: {resources: [{name: gpu, replicas: 2, rename: mps, devices: [1, 6]}]}}",
     "nvidia.com/mps", [1, 6], "40960M", 50),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine", "text", "resource", "gpus", "limit", "percentage"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS]
)
def test_one_daemon_per_mps_resource_with_nvidia_limits(
    tmp_path: Path, machine: str, text: str, resource: str, gpus: list[int], limit: str, percentage: int
) -> None:
    (plan,) = plans(machine, text, tmp_path)
    assert plan.resource == resource
    assert [g.index for g in plan.gpus] == gpus
    assert plan.pipe_dir == tmp_path / resource / "pipe"
    assert plan.env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / resource / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / resource / "log"),
    }
    assert plan.commands() == [f"set_default_device_pinned_mem_limit {i} {limit}" for i in gpus] + [
        f"set_default_active_thread_percentage {percentage}"
    ]


def test_time_slicing_needs_no_daemon(tmp_path: Path) -> None:
    assert plans("dgx-a100", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}", tmp_path) == []


Call = tuple[tuple[str, ...], dict[str, str], str | None]


def recorder(
    fail: Callable[[Sequence[str], str | None], bool] = lambda a, s: False,
) -> tuple[list[Call], control.Runner]:
    seen: list[Call] = []

    def run(argv: Sequence[str], env: Mapping[str, str], stdin: str | None) -> control.Result:
        seen.append((tuple(argv), dict(env), stdin))
        if fail(argv, stdin):
            return control.Result(1, "", "boom")
        return control.Result(0, "25.0\n" if stdin == "get_default_active_thread_percentage\n" else "", "")

    return seen, run


def test_daemon_start_and_stop_send_what_nvidia_sends(tmp_path: Path) -> None:
    (plan,) = plans("pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}", tmp_path)
    seen, run = recorder()
    daemon = control.Daemon(plan, control="ctl", nvidia_smi=["smi"], run=run)
    daemon.start()
    uuids = [g.uuid for g in plan.gpus]
    assert [c[0] for c in seen[:4]] == [("smi", "-i", u, "-c", "EXCLUSIVE_PROCESS") for u in uuids]
    assert seen[4] == (("ctl", "-d"), plan.env, None)
    assert [c[2] for c in seen[5:]] == [line + "\n" for line in plan.commands()]
    assert all(c[1] == plan.env for c in seen[5:])
    assert plan.started_file.exists() and plan.pipe_dir.is_dir() and plan.log_dir.is_dir()
    assert daemon.healthy()
    seen.clear()
    daemon.stop()
    assert seen[0] == (("ctl",), plan.env, "quit\n")
    assert [c[0] for c in seen[1:]] == [("smi", "-i", u, "-c", "DEFAULT") for u in uuids]
    assert not plan.started_file.exists() and not plan.log_dir.exists()


def test_a_failing_control_program_is_an_error_naming_the_command(tmp_path: Path) -> None:
    (plan,) = plans("pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", tmp_path)
    _, run = recorder(fail=lambda argv, stdin: list(argv) == ["ctl", "-d"])
    with pytest.raises(control.MpsError, match="ctl -d: exit 1: boom"):
        control.Daemon(plan, control="ctl", nvidia_smi=(), run=run).start()
    assert not plan.started_file.exists()


def test_stop_finishes_every_step_even_when_quit_fails(tmp_path: Path) -> None:
    (plan,) = plans("pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", tmp_path)
    seen, run = recorder(fail=lambda argv, stdin: stdin == "quit\n")
    daemon = control.Daemon(plan, control="ctl", nvidia_smi=["smi"], run=run)
    daemon.start()
    seen.clear()
    with pytest.raises(control.MpsError, match="quit"):
        daemon.stop()
    assert sum(1 for c in seen if c[0][-1] == "DEFAULT") == 4
    assert not plan.started_file.exists()


def test_daemon_against_the_fake_control_program(tmp_path: Path, fakes: dict[str, Path], monkeypatch: Any) -> None:
    monkeypatch.setenv("FAKE_MPS_RECORD", str(fakes["record"]))
    (plan,) = plans("pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 3}]}}", tmp_path / "mps")
    daemon = control.Daemon(plan, control=str(fakes["nvidia-cuda-mps-control"]), nvidia_smi=[str(fakes["nvidia-smi"])])
    daemon.start()
    assert daemon.healthy()
    daemon.stop()
    control_calls = [c for c in calls(fakes["record"]) if c["prog"] == "nvidia-cuda-mps-control"]
    assert control_calls[0]["argv"] == ["-d"] and control_calls[0]["pipe"] == str(plan.pipe_dir)
    assert [c["stdin"].strip() for c in control_calls[1:]] == [
        *plan.commands(),
        "get_default_active_thread_percentage",
        "quit",
    ]
    smi = [c["argv"] for c in calls(fakes["record"]) if c["prog"] == "nvidia-smi"]
    assert [a[-1] for a in smi] == ["EXCLUSIVE_PROCESS"] * 4 + ["DEFAULT"] * 4


# --- the command ----------------------------------------------------------------------------


def daemon_command(
    tmp_path: Path, fakes: dict[str, Path], text: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str], Path]:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(text)
    root = tmp_path / "mps"
    argv = [
        sys.executable, "-m", "kubegpu", "mps-daemon", "--machine", "pcie-4xt4", "--config-file", str(config_file),
        "--mps-container-root", str(root), "--control-program", str(fakes["nvidia-cuda-mps-control"]),
        "--nvidia-smi", str(fakes["nvidia-smi"]), *extra,
    ]  # fmt: skip
    return argv, {**os.environ, "FAKE_MPS_RECORD": str(fakes["record"]), **(env or {})}, root


def test_mps_daemon_starts_restarts_on_sighup_and_stops_on_sigterm(tmp_path: Path, fakes: dict[str, Path]) -> None:
    text = "version: v1\nsharing: {mps: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}\n"
    argv, env, root = daemon_command(tmp_path, fakes, text)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until((root / ".ready").exists, within=60.0)
        assert (root / "nvidia.com/gpu.shared/.started").exists()
        first = [c for c in calls(fakes["record"]) if c["prog"] == "nvidia-cuda-mps-control"]
        assert [c["stdin"].strip() or c["argv"][0] for c in first] == [
            "-d",
            *(f"set_default_device_pinned_mem_limit {i} 3840M" for i in range(4)),
            "set_default_active_thread_percentage 25",
        ]
        assert first[0]["pipe"] == str(root / "nvidia.com/gpu.shared/pipe")

        proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: sum(c["argv"] == ["-d"] for c in calls(fakes["record"])) == 2 and (root / ".ready").exists(),
            within=60.0,
        )

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not (root / ".ready").exists()
        assert not (root / "nvidia.com/gpu.shared/.started").exists()
        stdins = [c["stdin"].strip() for c in calls(fakes["record"]) if c["prog"] == "nvidia-cuda-mps-control"]
        assert stdins.count("quit") == 2
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("text", "extra", "code", "message"),
    [
        ("sharing: {mps: {resources: [{name: gpu, replicas: 49}]}}", [], 1,
         "maximum allowed replicas exceeded: 49 > 48"),
        ("sharing: {mps: {resources: [{name: gpu, replicas: 1}]}}", [], 2, "number of replicas must be >= 2"),
        ("sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", ["--mig-strategy", "mixed"], 2,
         "using --mig-strategy=mixed is not supported with MPS"),
    ],
    ids=["too_many_replicas", "one_replica", "mixed_mig"],
)  # fmt: skip
def test_mps_daemon_refuses_bad_configs(
    tmp_path: Path, fakes: dict[str, Path], text: str, extra: list[str], code: int, message: str
) -> None:
    argv, env, _ = daemon_command(tmp_path, fakes, text, *extra)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == code
    assert message in result.stderr
    assert calls(fakes["record"]) == []


def test_mps_daemon_exits_1_when_the_server_does_not_start(tmp_path: Path, fakes: dict[str, Path]) -> None:
    text = "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}"
    argv, env, root = daemon_command(tmp_path, fakes, text, env={"FAKE_MPS_FAIL": "nvidia-cuda-mps-control"})
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1
    assert "-d: exit 1: cannot start the MPS server" in result.stderr
    assert not (root / ".ready").exists()
    assert [c["argv"][-1] for c in calls(fakes["record"]) if c["prog"] == "nvidia-smi"][-4:] == ["DEFAULT"] * 4


def test_readiness_needs_the_ready_file_and_every_resources_started_file(tmp_path: Path) -> None:
    names = ["nvidia.com/gpu", "nvidia.com/gpu.big"]
    assert control.readiness_problem(tmp_path, []) is None
    problem = control.readiness_problem(tmp_path, names)
    assert problem is not None and f"{tmp_path}/.ready does not exist" in problem
    (tmp_path / ".ready").touch()
    (tmp_path / "nvidia.com" / "gpu").mkdir(parents=True)
    (tmp_path / "nvidia.com" / "gpu" / ".started").touch()
    problem = control.readiness_problem(tmp_path, names)
    assert problem is not None and "the MPS daemon of nvidia.com/gpu.big has not started" in problem
    (tmp_path / "nvidia.com" / "gpu.big").mkdir()
    (tmp_path / "nvidia.com" / "gpu.big" / ".started").touch()
    assert control.readiness_problem(tmp_path, names) is None


# --- the plugin's check ---------------------------------------------------------------------


def _ready(root: Path, *resources: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".ready").touch()
    for name in resources:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / ".started").touch()


def test_the_check_asks_each_daemon_on_its_pipe_and_sees_one_that_died_with_its_files_left(tmp_path: Path) -> None:
    program = str(fake_mps_control.install(tmp_path))
    root = tmp_path / "mps"
    (plan,) = plans("pcie-4xt4", "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", root)
    daemon = control.Daemon(plan, control=program, nvidia_smi=())
    check = control.DaemonCheck(root, [plan.resource], control=program)
    assert "/.ready does not exist" in (check.problem() or "")
    daemon.start()
    try:
        _ready(root)
        assert check.problem() is None
        assert (plan.pipe_dir / fake_mps_control.CONTROL).exists()
        pid = int((plan.pipe_dir / fake_mps_control.PID_FILE).read_text())
        os.kill(pid, signal.SIGKILL)  # dies as a crashed daemon does: pipe, .ready and .started stay
        wait_until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2])
        problem = check.problem()
        assert problem is not None
        assert f"the MPS control daemon of nvidia.com/gpu does not answer on {plan.pipe_dir}" in problem
        assert fake_mps_control.NO_DAEMON in problem
    finally:
        with contextlib.suppress(control.MpsError):
            daemon.stop()


def test_without_the_control_program_the_check_reads_the_files_only(tmp_path: Path) -> None:
    root = tmp_path / "mps"
    check = control.DaemonCheck(root, ["nvidia.com/gpu"], control=str(tmp_path / "no-such-program"))
    _ready(root, "nvidia.com/gpu")
    assert check.problem() is None and not check.asks_pipes
    (root / ".ready").unlink()
    assert "/.ready does not exist" in (check.problem() or "")


def test_the_daemon_works_under_the_container_root_without_the_host_root(
    tmp_path: Path, fakes: dict[str, Path]
) -> None:
    """NVIDIA's chart gives the daemon no MPS_ROOT: pipes, logs and readiness go under /mps (here: moved)."""
    text = "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}"
    argv, env, root = daemon_command(tmp_path, fakes, text)
    env.pop("MPS_ROOT", None)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (root / ".ready").exists() or proc.poll() is not None, within=60.0)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert (root / "nvidia.com/gpu/.started").exists()
        (first, *_) = [c for c in calls(fakes["record"]) if c["prog"] == "nvidia-cuda-mps-control"]
        assert (first["pipe"], first["log"]) == (str(root / "nvidia.com/gpu/pipe"), str(root / "nvidia.com/gpu/log"))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
