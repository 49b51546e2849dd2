"""Choosing a backend and reading a machine once: a shipped profile, or NVML (the fake library)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.gpu import errors, profiles
from kubegpu.gpu.backends import read_machine
from tests.fake_nvml import harness

pytest_plugins = ["tests.fake_nvml.fixtures"]


def test_a_named_profile_is_read_as_shipped() -> None:
    assert read_machine("pcie-4xt4") == profiles.load("pcie-4xt4")


def test_an_unknown_profile_is_a_profile_error_naming_it() -> None:
    with pytest.raises(errors.ProfileError, match="no-such-machine"):
        read_machine("no-such-machine")


def test_no_profile_reads_what_nvml_discovers_and_can_read_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_library: Path
) -> None:
    fake = harness.stage(tmp_path / "fake", "dgx-a100", fake_library)
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KUBEGPU_SYSFS_ROOT", str(fake.sysfs_root))
    roots = {"driver_root": str(fake.driver_root), "container_driver_root": str(tmp_path / "no-container-root")}
    first = read_machine(None, **roots)
    assert [g.uuid for g in first.gpus] == [g.uuid for g in fake.machine.gpus]
    # Each read opens and closes NVML on its own: a second one sees the same machine.
    assert read_machine(None, **roots) == first
