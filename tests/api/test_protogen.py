"""The committed generated code is exactly what grpcio-tools makes from our protos."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.api import protogen

pytest.importorskip("grpc_tools", reason="grpcio-tools is a dev dependency")


@pytest.mark.parametrize("proto", protogen.PROTOS)
def test_committed_generated_code_matches_a_fresh_generation(tmp_path: Path, proto: str) -> None:
    protogen.generate(tmp_path)
    stem = proto.removesuffix(".proto")
    for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
        fresh = (tmp_path / (stem + suffix)).read_text()
        committed = (protogen.SRC_ROOT / (stem + suffix)).read_text()
        assert committed == fresh, f"{stem + suffix} is stale: run python -m kubegpu.api.protogen"


def test_wire_names_are_the_kubelets() -> None:
    from kubegpu.api.deviceplugin.v1beta1 import api_pb2 as dp
    from kubegpu.api.podresources.v1 import api_pb2 as pr

    assert dp.DESCRIPTOR.package == "v1beta1"
    assert set(dp.DESCRIPTOR.services_by_name) == {"Registration", "DevicePlugin"}
    assert pr.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name == "v1.PodResourcesLister"
    fields = {f.name: f.number for f in dp.ContainerAllocateResponse.DESCRIPTOR.fields}
    assert fields == {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4, "cdi_devices": 5}
    fields = {f.name: f.number for f in dp.ContainerPreferredAllocationRequest.DESCRIPTOR.fields}
    assert fields == {"available_deviceIDs": 1, "must_include_deviceIDs": 2, "allocation_size": 3}
    assert [f.name for f in dp.Device.DESCRIPTOR.fields] == ["ID", "health", "topology"]
