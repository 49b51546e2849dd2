"""Replacing a file in one rename: the text, the mode, nothing left behind when it fails."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kubegpu.deviceplugin import atomicfile


def test_the_file_gets_the_text_and_mode_0644_in_a_directory_made_for_it(tmp_path: Path) -> None:
    target = tmp_path / "features.d" / "gfd"
    atomicfile.write(target, "nvidia.com/gpu.count=8\n")
    assert target.read_text() == "nvidia.com/gpu.count=8\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["gfd"]


def test_a_second_write_replaces_the_first_whole(tmp_path: Path) -> None:
    target = tmp_path / "spec.json"
    atomicfile.write(target, "x" * 10_000)
    atomicfile.write(target, "{}")
    assert target.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]


def test_a_failed_rename_leaves_no_temporary_file_and_raises(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    (target / "inside").mkdir(parents=True)  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        atomicfile.write(target, "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert [p.name for p in target.iterdir()] == ["inside"]
