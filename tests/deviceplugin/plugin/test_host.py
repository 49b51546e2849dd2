"""Where the plugin looks on its host: a mounted driver root, a simulated machine, IMEX channels, CDI host files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kubegpu.deviceplugin.plugin.host import HostError, HostView, imex_channels
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import plugin_config


def test_a_mounted_driver_root_with_dev_is_where_device_nodes_are_looked_for(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidiactl").touch()
    view = HostView.of(plugin_config(["--container-driver-root", str(tmp_path)]), simulated=True)
    assert view == HostView(dev_root=tmp_path, driver_root=tmp_path)
    assert view.exists("/dev/nvidiactl")
    assert not view.exists("/dev/nvidia-uvm")


def test_a_simulated_machine_without_a_mount_has_every_node() -> None:
    view = HostView.of(plugin_config(["--container-driver-root", "/nonexistent/driver-root"]), simulated=True)
    assert view == HostView(dev_root=None, driver_root=None)
    assert view.exists("/dev/nvidia-uvm-tools")


def test_nvml_without_a_mount_looks_at_slash_and_the_driver_root(tmp_path: Path) -> None:
    argv = ["--container-driver-root", "/nonexistent/driver-root", "--driver-root", str(tmp_path)]
    view = HostView.of(plugin_config(argv), simulated=False)
    assert view == HostView(dev_root=Path("/"), driver_root=tmp_path)
    assert view.exists("/dev/null")
    assert not view.exists("/dev/no-such-node")


def test_cdi_host_files_come_from_the_mounted_root(tmp_path: Path) -> None:
    machine = profiles.load("pcie-4xt4")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia-uvm").touch()
    lib = tmp_path / "usr/lib64" / f"libcuda.so.{machine.driver_version}"
    lib.parent.mkdir(parents=True)
    lib.touch()
    files = HostView(dev_root=tmp_path, driver_root=tmp_path).cdi_host_files(machine)
    assert files.control_nodes == ("/dev/nvidia-uvm",)
    assert files.libraries == (f"/usr/lib64/libcuda.so.{machine.driver_version}",)
    assert HostView(None, None).cdi_host_files(machine).libraries == ()


def test_imex_channels_present_are_kept_missing_ones_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    view = HostView(dev_root=tmp_path, driver_root=tmp_path)
    with caplog.at_level(logging.WARNING):
        assert imex_channels([0], required=False, view=view) == ()
    assert [r.getMessage() for r in caplog.records] == ["IMEX channel missing, skipped"]
    (tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel0").touch()
    assert imex_channels([0], required=True, view=view) == (0,)


def test_a_required_imex_channel_that_is_missing_is_an_error_naming_the_node(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="/dev/nvidia-caps-imex-channels/channel0 does not exist"):
        imex_channels([0], required=True, view=HostView(dev_root=tmp_path, driver_root=tmp_path))
