"""The supervisor in-process against a fake kubelet: start order, re-registration, health, retries, restarts."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.config import effective
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.plugin.supervisor import Supervisor, default_backend
from kubegpu.gpu import faults, profiles
from kubegpu.gpu.backend import GpuBackend
from kubegpu.gpu.model import Machine, Topology
from kubegpu.gpu.simulated import SimulatedBackend
from tests.deviceplugin.fake_kubelet import FakeKubelet
from tests.polling import eventually

DEADLINE_S = 20.0
UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]


def options(sock_dir: Path, fault_file: Path, **overrides: object) -> Config:
    """The plugin's config from flags: these defaults, ``flag_name=value`` overrides, None drops a flag."""
    values: dict[str, object] = {
        "kubelet_socket": sock_dir / "kubelet.sock",
        "machine": "dgx-a100",
        "fault_file": fault_file,
        "health_recovery_quiet_period": 0.0,
        "registration_retry_interval": 0.3,
    }
    values.update(overrides)
    argv: list[str] = []
    for name, value in values.items():
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    return loader(argv)()


class Running:
    """A supervisor task and a way to stop it and get its exit code."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.task = asyncio.create_task(supervisor.run())

    async def stop(self) -> int:
        self.supervisor.request("stop")
        return await asyncio.wait_for(self.task, DEADLINE_S)


@pytest.fixture
async def start(sock_dir: Path, fault_file: Path) -> AsyncIterator[Callable[..., Running]]:
    started: list[Running] = []

    def launch(**overrides: object) -> Running:
        factory = overrides.pop("backend_factory", default_backend)
        environ = overrides.pop("environ", {})
        reload = overrides.pop("reload", None)
        supervisor = Supervisor(
            options(sock_dir, fault_file, **overrides),
            backend_factory=factory,  # type: ignore[arg-type]
            environ=environ,  # type: ignore[arg-type]
            reload=reload,  # type: ignore[arg-type]
            handle_signals=False,
            watcher_poll_interval=0.5,
        )
        running = Running(supervisor)
        started.append(running)
        return running

    yield launch
    for running in started:
        if not running.task.done():
            await running.stop()


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


async def test_serves_then_registers_and_the_kubelet_sees_every_gpu(
    sock_dir: Path, kubelet: FakeKubelet, start: Callable[..., Running]
) -> None:
    start()
    entry = await kubelet.wait_registrations(1)
    assert (entry.request.version, entry.request.endpoint, entry.request.resource_name) == (
        "v1beta1",
        "nvidia-gpu.sock",
        "nvidia.com/gpu",
    )
    assert entry.options.get_preferred_allocation_available
    snapshot = entry.snapshots[0] if entry.snapshots else None
    await kubelet.wait_snapshot(entry, lambda h: list(h) == UUIDS)
    snapshot = entry.snapshots[0]
    assert [d.topology.nodes[0].ID for d in snapshot.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (sock_dir / "nvidia-gpu.sock").is_socket()


async def test_waits_for_a_kubelet_that_is_not_there_yet(
    sock_dir: Path, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kubegpu.deviceplugin.plugin.supervisor"):
        start()
        await eventually(lambda: "waiting for the kubelet" in messages(caplog), within=DEADLINE_S)
    kubelet = FakeKubelet(sock_dir)
    await kubelet.start()
    try:
        await kubelet.wait_registrations(1, DEADLINE_S)
    finally:
        await kubelet.stop()


async def test_a_recreated_kubelet_socket_ends_the_old_stream_before_registering_again(
    sock_dir: Path, kubelet: FakeKubelet, start: Callable[..., Running]
) -> None:
    running = start()
    first = await kubelet.wait_registrations(1)
    await kubelet.wait_snapshot(first, lambda h: len(h) == 8)
    await kubelet.rebind()  # the old plugin connection stays open on the kubelet side
    second = await kubelet.wait_registrations(2)
    assert first.ended.is_set() and first.stream_status is not None and first.stream_status.name == "OK"
    assert kubelet.log == [
        ("register", "nvidia.com/gpu"),
        ("stream-ended", "nvidia.com/gpu"),
        ("register", "nvidia.com/gpu"),
    ]
    await kubelet.wait_snapshot(second, lambda h: len(h) == 8)
    assert list(running.supervisor.servers) == ["nvidia.com/gpu"]
    assert running.supervisor.registrations == 2


async def test_an_injected_fault_reaches_the_kubelet_and_recovery_heals_it(
    kubelet: FakeKubelet, fault_file: Path, start: Callable[..., Running]
) -> None:
    start()
    entry = await kubelet.wait_registrations(1)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 8)
    faults.append(fault_file, faults.Fault(kind="xid", gpu=5, xid=79))
    health = await kubelet.wait_snapshot(entry, lambda h: h[UUIDS[5]] == "Unhealthy")
    assert [i for i, v in health.items() if v != "Healthy"] == [UUIDS[5]]
    faults.append(fault_file, faults.Fault(kind="recover", gpu=5))
    await kubelet.wait_snapshot(entry, lambda h: set(h.values()) == {"Healthy"})


async def test_health_survives_a_kubelet_restart(
    kubelet: FakeKubelet, fault_file: Path, start: Callable[..., Running]
) -> None:
    start()
    entry = await kubelet.wait_registrations(1)
    faults.append(fault_file, faults.Fault(kind="ecc-dbe", gpu=1))
    await kubelet.wait_snapshot(entry, lambda h: h.get(UUIDS[1]) == "Unhealthy")
    await kubelet.stop()
    await kubelet.start()
    again = await kubelet.wait_registrations(2)
    await kubelet.wait_snapshot(again, lambda h: len(h) == 8)
    assert again.health()[UUIDS[1]] == "Unhealthy"


async def test_the_quiet_period_heals_through_the_stream(
    kubelet: FakeKubelet, fault_file: Path, start: Callable[..., Running]
) -> None:
    start(health_recovery_quiet_period=0.3)
    entry = await kubelet.wait_registrations(1)
    faults.append(fault_file, faults.Fault(kind="xid", gpu=0, xid=94))
    await kubelet.wait_snapshot(entry, lambda h: h.get(UUIDS[0]) == "Unhealthy")
    await kubelet.wait_snapshot(entry, lambda h: h.get(UUIDS[0]) == "Healthy")


async def test_a_rejected_registration_is_retried_after_the_retry_interval(
    sock_dir: Path, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    kubelet = FakeKubelet(sock_dir, reject="nope, not now")
    await kubelet.start()
    try:
        with caplog.at_level(logging.ERROR, logger="kubegpu.deviceplugin.plugin.supervisor"):
            running = start()
            await eventually(lambda: "start failed" in messages(caplog), within=DEADLINE_S)
        assert running.supervisor.servers == {}  # a failed start stops what it started
        assert not (sock_dir / "nvidia-gpu.sock").exists()
        kubelet.reject = None
        await kubelet.wait_registrations(1, DEADLINE_S)
    finally:
        await kubelet.stop()


async def test_a_dead_kubelet_socket_is_retried_quietly_until_a_live_kubelet_takes_its_place(
    sock_dir: Path, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock_dir / "kubelet.sock"))
    dead.close()  # the file stays, nobody answers: a kubelet that died without cleaning up
    with caplog.at_level(logging.WARNING, logger="kubegpu.deviceplugin.plugin.supervisor"):
        start()
        await asyncio.sleep(2.5)  # a couple of the 1 s retries
    assert [r.getMessage() for r in caplog.records].count("kubelet not answering") == 1
    (sock_dir / "kubelet.sock").unlink()
    kubelet = FakeKubelet(sock_dir)
    await kubelet.start()
    try:
        await kubelet.wait_registrations(1, DEADLINE_S)
    finally:
        await kubelet.stop()


async def test_a_stop_request_is_not_held_up_by_a_kubelet_that_never_answers_register(
    sock_dir: Path, start: Callable[..., Running]
) -> None:
    kubelet = FakeKubelet(sock_dir, hang=True)
    await kubelet.start()
    try:
        running = start()
        await eventually(lambda: kubelet.register_calls > 0, within=DEADLINE_S, what="a Register call")
        began = asyncio.get_running_loop().time()
        assert await running.stop() == 0
        # Register's own deadline is 15 s; stopping must not wait for it
        assert asyncio.get_running_loop().time() - began < 5.0
        assert not (sock_dir / "nvidia-gpu.sock").exists()
    finally:
        await kubelet.stop()


async def test_a_restart_request_rediscovers_and_registers_again(
    kubelet: FakeKubelet, start: Callable[..., Running]
) -> None:
    opened: list[str] = []

    def factory(opts: Config) -> GpuBackend:
        opened.append("backend")
        return default_backend(opts)

    running = start(backend_factory=factory)
    first = await kubelet.wait_registrations(1)
    running.supervisor.request("restart")
    await kubelet.wait_registrations(2)
    assert len(opened) == 2
    assert first.ended.is_set()
    assert kubelet.log.index(("stream-ended", "nvidia.com/gpu")) < len(kubelet.log) - 1


async def test_stop_exits_zero_and_removes_the_plugin_socket(
    sock_dir: Path, kubelet: FakeKubelet, start: Callable[..., Running], no_leaked_tasks: None
) -> None:
    running = start()
    entry = await kubelet.wait_registrations(1)
    assert await running.stop() == 0
    assert not (sock_dir / "nvidia-gpu.sock").exists()
    await asyncio.wait_for(entry.ended.wait(), DEADLINE_S)


async def test_without_a_machine_profile_nvml_is_required_and_missing_means_exit_one(
    kubelet: FakeKubelet, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="kubegpu.deviceplugin.plugin.supervisor"):
        code = await asyncio.wait_for(start(machine=None).task, DEADLINE_S)
    assert code == 1
    assert kubelet.registrations == []
    assert any(r.getMessage() == "cannot start" for r in caplog.records)


async def test_a_machine_without_gpus_registers_nothing_and_waits(
    kubelet: FakeKubelet, fault_file: Path, start: Callable[..., Running]
) -> None:
    empty = Machine(name="empty", description="", gpus=(), topology=Topology((), (), (), (), ()))
    running = start(backend_factory=lambda opts: SimulatedBackend(empty, fault_file=fault_file))
    done, _ = await asyncio.wait({running.task}, timeout=0.5)
    assert not done  # it waits instead of exiting
    assert await running.stop() == 0
    assert kubelet.registrations == []


async def test_a_recreated_socket_directory_is_followed(
    sock_dir: Path, fault_file: Path, start: Callable[..., Running]
) -> None:
    plugins = sock_dir / "device-plugins"
    plugins.mkdir()
    kubelet = FakeKubelet(plugins)
    await kubelet.start()
    start(kubelet_socket=plugins / "kubelet.sock")
    await kubelet.wait_registrations(1)
    await kubelet.stop()
    shutil.rmtree(plugins)
    await asyncio.sleep(0.3)  # the gap in which the directory does not exist: the situation under test
    plugins.mkdir()
    await kubelet.start()
    try:
        again = await kubelet.wait_registrations(2, DEADLINE_S)
        await kubelet.wait_snapshot(again, lambda h: len(h) == 8)
    finally:
        await kubelet.stop()


# --- the NVIDIA-parity wiring ------------------------------------------------------------------------------


def loader(argv: list[str]) -> Callable[[], Config]:
    """What ``kubegpu plugin`` hands the supervisor for SIGHUP: parse ``argv`` and read the config file again."""
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    args = parser.parse_args(argv)
    return lambda: effective.load(args, {})


async def test_mixed_mig_serves_one_socket_per_resource_with_the_profiles_device_counts(
    sock_dir: Path, kubelet: FakeKubelet, start: Callable[..., Running]
) -> None:
    start(machine="a100-mig", mig_strategy="mixed")
    expected = {
        "nvidia.com/gpu": 2,
        "nvidia.com/mig-1g.10gb": 15,
        "nvidia.com/mig-2g.20gb": 3,
        "nvidia.com/mig-3g.40gb": 3,
        "nvidia.com/mig-4g.40gb": 1,
        "nvidia.com/mig-7g.80gb": 1,
    }
    await kubelet.wait_registrations(len(expected))
    got = {}
    for entry in kubelet.registrations:
        health = await kubelet.wait_snapshot(entry, bool)
        got[entry.resource] = len(health)
        assert entry.request.endpoint == f"nvidia-{entry.resource.split('/')[1]}.sock"
        assert (sock_dir / entry.request.endpoint).is_socket()
    assert got == expected


async def test_an_xid_on_a_gpu_with_four_replicas_marks_all_four_unhealthy(
    kubelet: FakeKubelet, fault_file: Path, start: Callable[..., Running], tmp_path: Path
) -> None:
    cfg = tmp_path / "ts.yaml"
    cfg.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}")
    start(config_file=cfg)
    entry = await kubelet.wait_registrations(1)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 32)
    faults.append(fault_file, faults.Fault(kind="xid", gpu=2, xid=79))
    health = await kubelet.wait_snapshot(entry, lambda h: "Unhealthy" in h.values())
    assert sorted(i for i, v in health.items() if v == "Unhealthy") == [f"{UUIDS[2]}::{n}" for n in range(4)]


async def test_without_a_kubelet_socket_it_serves_without_registering(
    sock_dir: Path, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kubegpu.deviceplugin.plugin.supervisor"):
        running = start(kubelet_socket="", socket_dir=sock_dir)
        await asyncio.wait_for(running.supervisor.registered.wait(), DEADLINE_S)
    assert "Skipping registration with Kubelet" in [r.getMessage() for r in caplog.records]
    async with grpc.aio.insecure_channel(constants.unix_target(sock_dir / "nvidia-gpu.sock")) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        call = stub.ListAndWatch(api_pb2.Empty())
        first = await asyncio.wait_for(call.read(), DEADLINE_S)
        assert [d.ID for d in first.devices] == UUIDS
        call.cancel()
    assert running.supervisor.registrations == 0
    assert await running.stop() == 0


async def test_nvml_failing_with_fail_on_init_error_false_waits_with_no_resources_and_stops_cleanly(
    kubelet: FakeKubelet, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    waiting = "No devices found. Waiting indefinitely."
    with caplog.at_level(logging.WARNING, logger="kubegpu.deviceplugin.plugin.supervisor"):
        running = start(machine=None, fail_on_init_error="false", container_driver_root="/nonexistent/driver-root")
        await eventually(lambda: waiting in messages(caplog), within=DEADLINE_S)
    assert not running.task.done()
    (record,) = [r for r in caplog.records if r.getMessage() == "No devices found. Waiting indefinitely."]
    assert "libnvidia-ml.so.1" in record.error  # type: ignore[attr-defined]
    assert kubelet.registrations == []
    assert await running.stop() == 0


async def test_an_invalid_single_mig_layout_exits_one_with_nvidias_text(
    kubelet: FakeKubelet, start: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="kubegpu.deviceplugin.plugin.supervisor"):
        code = await asyncio.wait_for(start(machine="a100-mig-single-invalid", mig_strategy="single").task, DEADLINE_S)
    assert code == 1
    (record,) = [r for r in caplog.records if r.getMessage() == "cannot start"]
    assert "all devices on the node must be configured with the same migEnabled value" in record.error  # type: ignore[attr-defined]
    assert kubelet.registrations == []


async def test_a_missing_required_imex_channel_exits_one_naming_it(
    kubelet: FakeKubelet, start: Callable[..., Running], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    driver_root = tmp_path / "driver-root"
    (driver_root / "dev").mkdir(parents=True)  # a mounted driver root: device nodes are looked for here
    cfg = tmp_path / "imex.yaml"
    cfg.write_text("imex: {channelIDs: [0], required: true}")
    with caplog.at_level(logging.ERROR, logger="kubegpu.deviceplugin.plugin.supervisor"):
        code = await asyncio.wait_for(start(config_file=cfg, container_driver_root=driver_root).task, DEADLINE_S)
    assert code == 1
    assert any("/dev/nvidia-caps-imex-channels/channel0" in getattr(r, "error", "") for r in caplog.records)


async def test_cdi_specs_are_written_at_start_and_again_at_every_restart(
    sock_dir: Path, kubelet: FakeKubelet, start: Callable[..., Running]
) -> None:
    spec_dir = sock_dir / "cdi"
    running = start(device_list_strategy="cdi-cri", cdi_spec_dir=spec_dir)
    first = await kubelet.wait_registrations(1)
    spec = spec_dir / "k8s.device-plugin.nvidia.com-gpu.json"
    written = json.loads(spec.read_text())
    assert written["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    assert sorted(d["name"] for d in written["devices"]) == sorted(UUIDS)
    assert [p.name for p in spec_dir.iterdir()] == [spec.name]  # the temporary file was renamed away
    response = await kubelet.stub(first).Allocate(
        api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[UUIDS[3]])]),
        timeout=DEADLINE_S,
    )
    assert [d.name for d in response.container_responses[0].cdi_devices] == [
        f"k8s.device-plugin.nvidia.com/gpu={UUIDS[3]}"
    ]
    spec.unlink()
    running.supervisor.request("restart")
    await kubelet.wait_registrations(2)
    assert json.loads(spec.read_text()) == written


async def test_an_mps_resource_waits_for_the_mps_daemons_readiness_files(
    sock_dir: Path,
    kubelet: FakeKubelet,
    start: Callable[..., Running],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The readiness files are read where the plugin's container sees the MPS root; the host path only goes
    # into the Allocate mounts (NVIDIA: /mps and MPS_ROOT).
    host_root, container_root = sock_dir / "host-mps", sock_dir / "mps"
    cfg = tmp_path / "mps.yaml"
    cfg.write_text("sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}")
    with caplog.at_level(logging.WARNING, logger="kubegpu.deviceplugin.plugin.supervisor"):
        running = start(config_file=cfg, mps_root=host_root, mps_container_root=container_root)
        await asyncio.sleep(1.5)
    assert kubelet.registrations == []
    waits = [r for r in caplog.records if r.getMessage() == "waiting for the MPS daemon"]
    assert len(waits) == 1 and f"{container_root}/.ready does not exist" in waits[0].reason  # type: ignore[attr-defined]
    (container_root / "nvidia.com" / "gpu").mkdir(parents=True)
    (container_root / ".ready").touch()
    (container_root / "nvidia.com" / "gpu" / ".started").touch()
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    response = await kubelet.stub(entry).Allocate(
        api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[f"{UUIDS[0]}::1"])]),
        timeout=DEADLINE_S,
    )
    (edits,) = response.container_responses
    assert edits.envs["CUDA_MPS_PIPE_DIRECTORY"] == f"{container_root}/nvidia.com/gpu/pipe"
    assert [(m.container_path, m.host_path) for m in edits.mounts] == [
        (f"{container_root}/nvidia.com/gpu/pipe", str(host_root / "nvidia.com/gpu/pipe")),
        ("/dev/shm", str(host_root / "shm")),
    ]
    assert running.supervisor.registrations == 1


async def test_mps_devices_are_unhealthy_while_the_daemon_is_gone_and_healthy_when_it_is_back(
    sock_dir: Path,
    kubelet: FakeKubelet,
    start: Callable[..., Running],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no control program: the readiness files decide
    root = sock_dir / "mps"
    (root / "nvidia.com" / "gpu").mkdir(parents=True)
    (root / ".ready").touch()
    (root / "nvidia.com" / "gpu" / ".started").touch()
    cfg = tmp_path / "mps.yaml"
    cfg.write_text("sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}")
    running = start(config_file=cfg, mps_root="/run/nvidia/mps", mps_container_root=root, mps_check_interval=0.1)
    entry = await kubelet.wait_registrations(1, DEADLINE_S)
    await kubelet.wait_snapshot(entry, lambda h: len(h) == 16 and set(h.values()) == {"Healthy"})
    (root / ".ready").unlink()  # the daemon stopped (SIGTERM removes it; a dead pipe reads the same)
    await kubelet.wait_snapshot(entry, lambda h: set(h.values()) == {"Unhealthy"}, DEADLINE_S)
    assert running.supervisor.registrations == 1  # still registered: the kubelet keeps the resource, at 0
    (root / ".ready").touch()
    await kubelet.wait_snapshot(entry, lambda h: set(h.values()) == {"Healthy"}, DEADLINE_S)
    assert len(kubelet.registrations) == 1


async def test_sighup_reads_the_config_again_and_a_broken_one_keeps_the_running_config(
    sock_dir: Path, fault_file: Path, kubelet: FakeKubelet, start: Callable[..., Running], tmp_path: Path
) -> None:
    cfg = tmp_path / "sharing.yaml"
    cfg.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}")
    argv = ["--config-file", str(cfg), "--machine", "dgx-a100", "--fault-file", str(fault_file)]
    argv += ["--kubelet-socket", str(sock_dir / "kubelet.sock")]
    running = start(config_file=cfg, reload=loader(argv))
    first = await kubelet.wait_registrations(1)
    await kubelet.wait_snapshot(first, lambda h: len(h) == 16)
    cfg.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 3}]}}")
    running.supervisor.request("restart")
    second = await kubelet.wait_registrations(2)
    await kubelet.wait_snapshot(second, lambda h: len(h) == 24)
    cfg.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}")
    running.supervisor.request("restart")
    third = await kubelet.wait_registrations(3)
    await kubelet.wait_snapshot(third, lambda h: len(h) == 24)
    assert not running.task.done()
