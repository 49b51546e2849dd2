"""The Node's GPU description: what a scheduler reads back is the machine as served, health included."""

from __future__ import annotations

import json

import pytest

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from kubegpu.placement import command as topology_command
from tests.deviceplugin.fixtures.build import plugin_config


def _described(profile: str, argv: list[str] | None = None, unhealthy: dict[str, set[str]] | None = None) -> dict:
    machine = profiles.load(profile)
    served = resource_map.build(machine, plugin_config(argv)).resources
    return nodegpus.describe(machine, served, unhealthy or {})


def test_dgx_a100_describes_every_gpu_as_the_profile_has_it() -> None:
    machine = profiles.load("dgx-a100")
    described = _described("dgx-a100")
    assert described["version"] == "v1"
    assert [g["index"] for g in described["gpus"]] == list(range(8))
    for gpu, entry in zip(machine.gpus, described["gpus"], strict=True):
        assert entry["uuid"] == gpu.uuid
        assert entry["id"] == gpu.uuid  # the default device-id-strategy advertises UUIDs
        assert entry["resource"] == "nvidia.com/gpu"
        assert entry["model"] == gpu.product_name
        assert entry["memoryMiB"] == gpu.memory_mib
        assert entry["numa"] == gpu.numa_node
        assert entry["health"] == "Healthy"
        assert entry["mig"] == []


def test_the_link_matrix_is_the_one_topology_show_prints() -> None:
    machine = profiles.load("dgx1-v100")
    described = _described("dgx1-v100")
    printed = topology_command.show(machine.topology, "t")
    for i, row in enumerate(described["links"]):
        assert printed[2 + i].split()[1 : 1 + len(row)] == row
    assert described["links"][0][0] == "X"
    assert any(cell.startswith("NV") for cell in described["links"][0])


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx1-v100", "pcie-4xt4", "hgx-h200"])
def test_the_published_topology_reads_back_as_the_machines(profile: str) -> None:
    described = json.loads(nodegpus.node_annotations(_described(profile))[nodegpus.GPUS_ANNOTATION])
    assert profiles.topology_from_dict(described["topology"]) == profiles.load(profile).topology


def test_the_plain_id_list_is_the_advertised_ids_in_gpu_index_order() -> None:
    machine = profiles.load("pcie-4xt4")
    described = _described("pcie-4xt4")
    assert nodegpus.gpu_ids(described) == ",".join(g.uuid for g in sorted(machine.gpus, key=lambda g: g.index))


def test_an_unhealthy_whole_gpu_device_marks_only_its_gpu() -> None:
    machine = profiles.load("dgx-a100")
    sick = machine.gpus[5].uuid
    described = _described("dgx-a100", unhealthy={"nvidia.com/gpu": {sick}})
    assert [g["health"] for g in described["gpus"]] == ["Healthy"] * 5 + ["Unhealthy"] + ["Healthy"] * 2


def test_an_unhealthy_replica_marks_its_gpu_and_replicas_give_no_plain_id_list() -> None:
    text = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
    machine = profiles.load("pcie-4xt4")
    cfg = plugin_config(text=text)
    served = resource_map.build(machine, cfg).resources
    replica = next(d.id for d in served[0].devices if d.gpu_index == 2)
    described = nodegpus.describe(machine, served, {"nvidia.com/gpu": {replica}})
    assert [g["health"] for g in described["gpus"]] == ["Healthy", "Healthy", "Unhealthy", "Healthy"]
    assert [g["id"] for g in described["gpus"]] == [None] * 4
    assert nodegpus.node_annotations(described)[nodegpus.GPU_IDS_ANNOTATION] is None


def test_mig_devices_are_listed_with_their_ids_and_health() -> None:
    machine = profiles.load("a100-mig")
    served = resource_map.build(machine, plugin_config(["--mig-strategy", "mixed"])).resources
    first_mig = machine.gpus[2].mig_devices[0]
    resource = next(r for r in served if first_mig.uuid in r.physical_ids())
    device = next(d for d in resource.devices if d.physical_id == first_mig.uuid)
    described = nodegpus.describe(machine, served, {resource.name: {device.id}})
    gpu2 = described["gpus"][2]
    assert [m["profile"] for m in gpu2["mig"]] == [m.profile for m in machine.gpus[2].mig_devices]
    assert gpu2["mig"][0] == {
        "index": first_mig.id_index,
        "uuid": first_mig.uuid,
        "profile": first_mig.profile,
        "memoryMiB": first_mig.memory_mib,
        "resource": resource.name,
        "id": device.id,
        "health": "Unhealthy",
    }
    assert [m["health"] for m in gpu2["mig"][1:]] == ["Healthy"] * (len(gpu2["mig"]) - 1)
    assert gpu2["health"] == "Healthy"  # one MIG device down leaves the GPU's others usable
    assert gpu2["id"] is None


def test_a_mig_gpu_whose_every_mig_device_is_unhealthy_is_unhealthy() -> None:
    machine = profiles.load("a100-mig")
    served = resource_map.build(machine, plugin_config(["--mig-strategy", "mixed"])).resources
    gpu = machine.gpus[7]
    bad: dict[str, set[str]] = {}
    for r in served:
        for d in r.devices:
            if d.gpu_index == gpu.index:
                bad.setdefault(r.name, set()).add(d.id)
    assert bad, "the a100-mig profile's last GPU has MIG devices"
    assert nodegpus.describe(machine, served, bad)["gpus"][7]["health"] == "Unhealthy"


def test_the_annotation_is_the_same_bytes_for_the_same_node() -> None:
    assert nodegpus.node_annotations(_described("dgx-a100")) == nodegpus.node_annotations(_described("dgx-a100"))
