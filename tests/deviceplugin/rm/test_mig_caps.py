"""The mig-minors table: parsing, the driver's fixed numbering, reading from a proc root, device paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.deviceplugin.rm import mig_caps
from tests.deviceplugin.fixtures.build import FIXTURES


def test_parse_reads_every_kind_of_line_and_skips_others() -> None:
    minors = mig_caps.parse((FIXTURES / "mig-minors").read_text())
    assert (minors.config, minors.monitor) == (1, 2)
    assert minors.gi_access(2, 2) == 40
    assert minors.ci_access(2, 2, 1) == 42
    assert minors.ci_access(7, 0, 0) == 71


@pytest.mark.parametrize(
    ("gpu", "gi", "ci", "minor"),
    [(0, 0, None, 3), (0, 0, 0, 4), (0, 0, 7, 11), (0, 1, None, 12), (1, 0, None, 138)],
    ids=["first_gi", "first_ci", "last_ci_of_gi0", "second_gi", "next_gpu"],
)
def test_driver_layout_numbers_gis_then_their_cis(gpu: int, gi: int, ci: int | None, minor: int) -> None:
    layout = mig_caps.driver_layout(max_gpus=2)
    found = layout.gi_access(gpu, gi) if ci is None else layout.ci_access(gpu, gi, ci)
    assert found == minor


def test_render_then_parse_is_the_same_table() -> None:
    layout = mig_caps.driver_layout(max_gpus=3)
    assert mig_caps.parse(mig_caps.render(layout)) == layout


def test_read_finds_the_table_under_the_proc_root(tmp_path: Path) -> None:
    path = tmp_path / mig_caps.MIG_MINORS
    path.parent.mkdir(parents=True)
    path.write_text((FIXTURES / "mig-minors").read_text())
    minors = mig_caps.read(tmp_path)
    assert minors is not None and minors.gi_access(7, 0) == 70


def test_read_without_the_table_is_none(tmp_path: Path) -> None:
    assert mig_caps.read(tmp_path) is None


def test_mig_device_paths_are_parent_node_and_two_caps() -> None:
    minors = mig_caps.parse((FIXTURES / "mig-minors").read_text())
    assert mig_caps.mig_device_paths(2, 1, 0, minors) == (
        "/dev/nvidia2",
        "/dev/nvidia-caps/nvidia-cap30",
        "/dev/nvidia-caps/nvidia-cap31",
    )


def test_a_missing_minor_names_the_capability() -> None:
    minors = mig_caps.parse("gpu0/gi1/access 5\n")
    with pytest.raises(mig_caps.MigCapsError, match=r"gpu0/gi1/ci0/access"):
        mig_caps.mig_device_paths(0, 1, 0, minors)
