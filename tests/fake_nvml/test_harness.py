"""A staged node's driver root looks like a driver installation to what reads it besides NVML."""

from __future__ import annotations

from pathlib import Path

from kubegpu.deviceplugin.cdi import hostfiles
from tests.fake_nvml import harness

pytest_plugins = ["tests.fake_nvml.fixtures"]


def test_the_driver_root_holds_the_versioned_libraries_cdi_spec_generation_looks_for(
    tmp_path: Path, fake_library: Path
) -> None:
    node = harness.stage(tmp_path / "node", "dgx-a100", fake_library)
    version = node.machine.driver_version
    found = hostfiles.discover(node.driver_root, tmp_path / "no-dev", version)
    directory = "/" + str(node.library_dir.relative_to(node.driver_root))
    assert set(found.libraries) == {f"{directory}/libcuda.so.{version}", f"{directory}/libnvidia-ml.so.{version}"}
    assert (f"libcuda.so.{version}", f"{directory}/libcuda.so.1") in found.symlinks
    # the soname link resolves as a loader would follow it, and NVML is still the fake
    assert (node.library_dir / "libcuda.so.1").resolve() == (node.library_dir / f"libcuda.so.{version}").resolve()
    assert (node.library_dir / "libnvidia-ml.so.1").resolve() == fake_library.resolve()
