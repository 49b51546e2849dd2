"""Start-up and restart: the socket-dir clean-up, checkpoint restore without Allocate, refusing a second emulator."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from kubegpu.api import constants
from kubegpu.kubelet import errors
from kubegpu.kubelet.daemon import Daemon, Options
from tests.kubelet.conftest import EmulatorFactory, StubFactory, capacity
from tests.kubelet.stubplugin import devices
from tests.kubelet.test_node import R, make_pod
from tests.polling import eventually


def litter(socket_dir: Path) -> None:
    """What a dead kubelet and its plugins leave behind."""
    socket_dir.mkdir(parents=True)
    for name in ("old-plugin.sock", "kubelet.sock", ".kubelet_internal_checkpoint123", "DEPRECATION"):
        (socket_dir / name).write_text("x")
    (socket_dir / "a-dir").mkdir()
    (socket_dir / "link").symlink_to(socket_dir / "a-dir")
    (socket_dir / constants.CHECKPOINT_NAME).write_bytes(b"{}")


def listing(socket_dir: Path) -> list[str]:
    return sorted(p.name for p in socket_dir.iterdir())


def mode(path: Path) -> int:
    return path.stat().st_mode


async def test_start_creates_the_dir_and_deletes_every_file_but_the_checkpoint(
    socket_dir: Path, start_emulator: EmulatorFactory
) -> None:
    litter(socket_dir)
    daemon = await start_emulator()
    assert listing(socket_dir) == [".kubegpu-kubelet", "a-dir", "kubelet.sock", constants.CHECKPOINT_NAME]
    assert stat.S_ISSOCK(mode(socket_dir / "kubelet.sock"))
    assert daemon.node.info["restored"]["checkpoint"].startswith("ignored: checkpoint")  # type: ignore[index]


async def test_a_new_socket_dir_is_created_with_mode_0750(socket_dir: Path, start_emulator: EmulatorFactory) -> None:
    await start_emulator()
    assert stat.S_IMODE(mode(socket_dir)) == 0o750


async def test_a_missing_pod_resources_directory_is_created_and_served(
    sock_dir: Path, start_emulator: EmulatorFactory
) -> None:
    target = sock_dir / "elsewhere" / "pod-resources" / "kubelet.sock"
    await start_emulator(pod_resources_socket=target)
    assert stat.S_IMODE(mode(target.parent)) == 0o750
    assert stat.S_ISSOCK(mode(target))


async def restart_with_one_pod(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> tuple[Daemon, dict[str, object]]:
    first = await start_emulator()
    stub = await start_stub(devs=devices(4), pre_start_required=True, endpoint="gen1.sock")
    await eventually(lambda: capacity(first) == (4, 4))
    admitted = await first.node.admit(make_pod("p", ("a", 2), uid="u1"))
    await stub.stop()
    await first.stop()
    second = await start_emulator()
    return second, admitted


async def test_a_restart_restores_allocations_with_capacity_zero_and_a_stopped_endpoint(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator, _ = await restart_with_one_pod(start_emulator, start_stub)
    # kubelet-device-manager.md §11 [verified]: capacity 0, allocatable 0, stopped, no options, same IDs.
    assert capacity(emulator) == (0, 0)
    endpoint = emulator.node.manager.endpoints[R]
    assert endpoint.stopped and endpoint.options is None
    status = emulator.node.status()
    assert status["pods"] == [
        {"namespace": "ns", "name": "p", "uid": "u1", "containers": {"a": {R: ["dev-0", "dev-1"]}}}
    ]


async def test_readmitting_before_the_plugin_is_back_fails_like_a_node_reboot(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator, _ = await restart_with_one_pod(start_emulator, start_stub)
    with pytest.raises(errors.ControlError, match="no healthy devices present; cannot allocate unhealthy devices"):
        await emulator.node.admit(make_pod("p", ("a", 2), uid="u1"))
    assert emulator.node.status()["pods"][0]["containers"] == {"a": {R: ["dev-0", "dev-1"]}}  # type: ignore[index]


async def test_after_reregistration_the_restored_pod_gets_its_cached_options_without_allocate(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator, admitted = await restart_with_one_pod(start_emulator, start_stub)
    stub = await start_stub(devs=devices(4), pre_start_required=True, endpoint="gen2.sock")
    await eventually(lambda: capacity(emulator) == (4, 4))
    again = await emulator.node.admit(make_pod("p", ("a", 2), uid="u1"))
    assert stub.calls.allocate == []
    assert again["containers"] == admitted["containers"]
    # PreStartContainer runs again at the restart (kubelet-device-manager.md §8 [verified]).
    assert stub.calls.pre_start == [["dev-0", "dev-1"]]
    # The restored allocation still counts: a new pod gets only the other two devices.
    other = await emulator.node.admit(make_pod("q", ("a", 2)))
    assert other["containers"]["a"]["resources"] == {R: ["dev-2", "dev-3"]}  # type: ignore[index]


async def test_a_restored_resource_whose_plugin_never_returns_is_removed_after_the_grace_period(
    socket_dir: Path, start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    first = await start_emulator()
    stub = await start_stub(devs=devices(2))
    await eventually(lambda: capacity(first) == (2, 2))
    await stub.stop()
    await first.stop()
    second = await start_emulator(grace_period=0.3)
    assert await eventually(lambda: second.node.status()["resources"][R]["removed"])  # type: ignore[index]
    doc = json.loads((socket_dir / constants.CHECKPOINT_NAME).read_bytes())
    assert doc["Data"]["RegisteredDevices"] == {}


async def test_a_corrupt_checkpoint_is_ignored_and_allocations_are_lost(
    socket_dir: Path, start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    first = await start_emulator()
    stub = await start_stub(devs=devices(2))
    await eventually(lambda: capacity(first) == (2, 2))
    await first.node.admit(make_pod("p", ("a", 1)))
    await stub.stop()
    await first.stop()
    path = socket_dir / constants.CHECKPOINT_NAME
    path.write_bytes(path.read_bytes().replace(b"dev-0", b"dev-9"))
    second = await start_emulator()
    assert "checksum mismatch" in second.node.info["restored"]["checkpoint"]  # type: ignore[index]
    assert second.node.manager.pod_devices.pods() == []
    assert R not in second.node.manager.endpoints


async def test_allocations_of_pods_the_store_does_not_know_are_dropped_at_start(
    socket_dir: Path, start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    first = await start_emulator()
    stub = await start_stub(devs=devices(2))
    await eventually(lambda: capacity(first) == (2, 2))
    await first.node.admit(make_pod("p", ("a", 1), uid="u1"))
    await stub.stop()
    await first.stop()
    # As if the emulator died between writing the checkpoint and recording the pod.
    (socket_dir / ".kubegpu-kubelet" / "pods.json").write_text(json.dumps({"version": 1, "pods": []}))
    second = await start_emulator()
    assert second.node.info["restored"]["dropped"] == ["u1"]  # type: ignore[index]
    assert second.node.manager.pod_devices.pods() == []


async def test_a_second_emulator_on_the_same_socket_dir_is_refused(socket_dir: Path, emulator: Daemon) -> None:
    with pytest.raises(errors.KubeletError, match="another kubegpu kubelet is already serving"):
        await Daemon(Options(socket_dir=socket_dir)).start()
    assert (socket_dir / "kubelet.sock").exists()


async def test_a_pod_resources_socket_in_use_is_refused(sock_dir: Path, emulator: Daemon) -> None:
    other = sock_dir / "other"
    with pytest.raises(errors.KubeletError, match=r"pod-resources socket .* is in use"):
        await Daemon(Options(socket_dir=other, pod_resources_socket=emulator.pod_resources.socket_path)).start()  # type: ignore[union-attr]


async def test_the_default_pod_resources_socket_sits_beside_the_socket_dir(sock_dir: Path, emulator: Daemon) -> None:
    assert emulator.pod_resources is not None
    assert emulator.pod_resources.socket_path == sock_dir / "pod-resources" / "kubelet.sock"
    assert stat.S_ISSOCK(mode(emulator.pod_resources.socket_path))


@pytest.mark.parametrize(
    "content", [b"{not json", b"\xff\xfe", b'{"version": 9, "pods": []}'], ids=["not-json", "binary", "version"]
)
async def test_a_corrupt_pod_store_is_an_error_naming_the_file_not_a_silent_empty_start(
    socket_dir: Path, content: bytes
) -> None:
    store = socket_dir / ".kubegpu-kubelet" / "pods.json"
    store.parent.mkdir(parents=True)
    store.write_bytes(content)
    with pytest.raises(errors.PodStoreError, match=f"pod store {store}: corrupt: .*; move it away"):
        await Daemon(Options(socket_dir=socket_dir, serve_pod_resources=False)).start()
