"""Device IDs: replica suffixes, de-duplication, and whole-GPU devices built from machine profiles."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin.rm import devices
from kubegpu.gpu import profiles


@pytest.mark.parametrize(
    ("device_id", "physical"),
    [
        ("GPU-a", "GPU-a"),
        ("GPU-a::0", "GPU-a"),
        ("GPU-a::12", "GPU-a"),
        ("MIG-b::3", "MIG-b"),
        ("GPU-a::1::2", "GPU-a"),  # anything after the first :: is the replica part
        ("", ""),
    ],
    ids=["plain", "replica-0", "replica-12", "mig-replica", "first-separator-wins", "empty"],
)
def test_strip_replica_drops_everything_after_the_first_double_colon(device_id: str, physical: str) -> None:
    assert devices.strip_replica(device_id) == physical


@pytest.mark.parametrize(
    ("requested", "visible"),
    [
        (["foo", "bar", "foo"], ["foo", "bar"]),
        (["GPU-a::0", "GPU-a::3"], ["GPU-a"]),
        (["GPU-b::1", "GPU-a::0", "GPU-b::0"], ["GPU-b", "GPU-a"]),
        ([], []),
    ],
    ids=["nvidia-example-dedup", "nvidia-example-replicas", "first-seen-order", "empty"],
)
def test_unique_physical_ids_strips_and_dedups_in_first_seen_order(requested: list[str], visible: list[str]) -> None:
    assert devices.unique_physical_ids(requested) == visible


_ids = st.lists(
    st.sampled_from(["GPU-a", "GPU-b", "GPU-c"]).flatmap(
        lambda base: st.one_of(st.just(base), st.integers(0, 5).map(lambda n: devices.replica_id(base, n)))
    )
)


@given(_ids)
def test_unique_physical_ids_property_keeps_each_physical_id_once_in_order(requested: list[str]) -> None:
    result = devices.unique_physical_ids(requested)
    assert len(result) == len(set(result))
    assert set(result) == {devices.strip_replica(i) for i in requested}
    firsts = [devices.strip_replica(i) for i in requested]
    assert result == sorted(result, key=firsts.index)


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx1-v100", "pcie-4xt4", "hgx-h200", "a100-mig"])
def test_a_whole_gpu_device_is_its_uuid_with_numa_index_and_device_node(profile: str) -> None:
    machine = profiles.load(profile)
    result = [devices.whole_gpu(g) for g in machine.gpus]
    assert [d.id for d in result] == [g.uuid for g in machine.gpus]
    assert [d.numa for d in result] == [g.numa_node for g in machine.gpus]
    assert [d.index for d in result] == [str(g.index) for g in machine.gpus]
    assert all(
        d.paths == (f"/dev/nvidia{g.minor}",) and d.mig is None for d, g in zip(result, machine.gpus, strict=True)
    )
