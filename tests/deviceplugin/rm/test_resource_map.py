"""Resource naming as NVIDIA's plugin does it: MIG strategies, startup errors, renames, replicas, MPS limits."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.rm import mig_caps, resource_map
from kubegpu.deviceplugin.rm.resource_map import ResourceMapError
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine, Topology
from tests.deviceplugin.fixtures.build import FIXTURES, machine, plugin_config, profile


def counts(machine_name: str, argv: list[str] | None = None, text: str | None = None) -> dict[str, int]:
    built = resource_map.build(profile(machine_name), plugin_config(argv, text=text))
    return {r.name: len(r.devices) for r in built}


STRATEGIES = [
    ("none_advertises_mig_enabled_gpus_whole", "a100-mig", "none", {"nvidia.com/gpu": 8}),
    ("mixed_one_resource_per_profile", "a100-mig", "mixed", {
        "nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 15, "nvidia.com/mig-2g.20gb": 3,
        "nvidia.com/mig-3g.40gb": 3, "nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-7g.80gb": 1}),
    ("single_valid_layout_is_nvidia_com_gpu", "a100-mig-single", "single", {"nvidia.com/gpu": 56}),
    ("single_without_mig_is_whole_gpus", "dgx-a100", "single", {"nvidia.com/gpu": 8}),
    ("mixed_without_mig_is_whole_gpus", "pcie-4xt4", "mixed", {"nvidia.com/gpu": 4}),
    ("mixed_on_the_single_invalid_layout", "a100-mig-single-invalid", "mixed",
     {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 28}),
    ("none_ignores_unusual_mig_profiles", "mig-odd-profiles", "none", {"nvidia.com/gpu": 1}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "strategy", "expected"), [r[1:] for r in STRATEGIES], ids=[r[0] for r in STRATEGIES]
)
def test_mig_strategies_name_resources_as_nvidia(machine_name: str, strategy: str, expected: dict[str, int]) -> None:
    assert counts(machine_name, ["--mig-strategy", strategy]) == expected


STARTUP_ERRORS = [
    ("single_with_mig_on_some_gpus_only", "a100-mig-single-invalid", "single", None,
     "all devices on the node must be configured with the same migEnabled value"),
    ("single_with_several_profiles", "a100-mig", "single", None, "more than one MIG device type present on node"),
    ("single_with_an_empty_mig_gpu", "mig-empty", "single", None,
     "at least one device with migEnabled=true was not configured correctly: device 1 has no MIG devices configured"),
    ("mixed_profile_matching_no_pattern", "mig-odd-profiles", "mixed", None,
     "MIG profile '1c.2g.20gb' does not match any resource patterns"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "strategy", "text", "message"),
    [r[1:] for r in STARTUP_ERRORS],
    ids=[r[0] for r in STARTUP_ERRORS],
)
def test_invalid_layouts_fail_at_start_with_nvidia_texts(
    machine_name: str, strategy: str, text: str | None, message: str
) -> None:
    with pytest.raises(ResourceMapError) as info:
        resource_map.build(profile(machine_name), plugin_config(["--mig-strategy", strategy], text=text))
    assert message in str(info.value)
    assert str(info.value).startswith("error building device map from config.resources: ")


def test_mixed_only_warns_about_an_empty_mig_gpu() -> None:
    built = resource_map.build(profile("mig-empty"), plugin_config(["--mig-strategy", "mixed"]))
    assert built.names == ("nvidia.com/mig-1g.10gb",)
    assert built.warnings == ("device 1 has no MIG devices configured",)


def test_a_pattern_for_the_compute_split_profile_makes_mixed_work() -> None:
    text = "resources: {mig: [{pattern: '1c.*', name: mig-1c}]}"
    assert counts("mig-odd-profiles", ["--mig-strategy", "mixed"], text) == {
        "nvidia.com/mig-1c": 1,
        "nvidia.com/mig-1g.10gb": 1,
        "nvidia.com/mig-1g.10gb.me": 1,
    }


RENAMES = [
    ("gpu_pattern_rename", "dgx-a100", "none", "resources: {gpus: [{pattern: '*A100*', name: a100}]}",
     {"nvidia.com/a100": 8}),
    ("gpu_pattern_no_match_falls_back", "pcie-4xt4", "none", "resources: {gpus: [{pattern: '*A100*', name: a100}]}",
     {"nvidia.com/gpu": 4}),
    ("mig_pattern_rename_groups_profiles", "a100-mig", "mixed",
     "resources: {mig: [{pattern: '1g.*', name: mig-small}, {pattern: '*', name: mig-large}]}",
     {"nvidia.com/gpu": 2, "nvidia.com/mig-small": 15, "nvidia.com/mig-large": 8}),
    ("single_mig_rename", "a100-mig-single", "single", "resources: {mig: [{pattern: '1g.10gb', name: slice}]}",
     {"nvidia.com/slice": 56}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "strategy", "text", "expected"), [r[1:] for r in RENAMES], ids=[r[0] for r in RENAMES]
)
def test_resource_patterns_rename_as_configured(
    machine_name: str, strategy: str, text: str, expected: dict[str, int]
) -> None:
    assert counts(machine_name, ["--mig-strategy", strategy], text) == expected


# --- sharing --------------------------------------------------------------------------------

SHARING = [
    ("time_slicing_multiplies_capacity", "dgx-a100", [],
     "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}", {"nvidia.com/gpu": 32}),
    ("rename_by_default_publishes_dot_shared", "dgx-a100", [],
     "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}",
     {"nvidia.com/gpu.shared": 32}),
    ("explicit_rename", "dgx-a100", [], "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, rename: ts}]}}",
     {"nvidia.com/ts": 16}),
    ("device_count_selects_the_first_n", "dgx-a100", [],
     "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 3, rename: gpu.shared, devices: 2}]}}",
     {"nvidia.com/gpu": 6, "nvidia.com/gpu.shared": 6}),
    ("device_list_selects_indices", "pcie-4xt4", [],
     "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, rename: gpu.shared, devices: [0, '3']}]}}",
     {"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 4}),
    ("mig_resources_can_be_time_sliced", "a100-mig", ["--mig-strategy", "mixed"],
     "sharing: {timeSlicing: {resources: [{name: mig-7g.80gb, replicas: 7}]}}",
     {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 15, "nvidia.com/mig-2g.20gb": 3, "nvidia.com/mig-3g.40gb": 3,
      "nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-7g.80gb": 7}),
    ("mig_device_by_index", "a100-mig", ["--mig-strategy", "mixed"],
     "sharing: {timeSlicing: {resources: [{name: mig-3g.40gb, replicas: 2, rename: half, devices: ['5:1']}]}}",
     {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 15, "nvidia.com/mig-2g.20gb": 3, "nvidia.com/mig-3g.40gb": 2,
      "nvidia.com/half": 2, "nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-7g.80gb": 1}),
    ("unknown_resource_is_untouched", "pcie-4xt4", [],
     "sharing: {timeSlicing: {resources: [{name: a100, replicas: 2}]}}", {"nvidia.com/gpu": 4}),
    ("mps_replicas", "pcie-4xt4", ["--mps-root", "/m"], "sharing: {mps: {resources: [{name: gpu, replicas: 48}]}}",
     {"nvidia.com/gpu": 192}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "argv", "text", "expected"), [r[1:] for r in SHARING], ids=[r[0] for r in SHARING]
)
def test_sharing_replicates_the_selected_devices(
    machine_name: str, argv: list[str], text: str, expected: dict[str, int]
) -> None:
    assert counts(machine_name, argv, text) == expected


def test_replica_ids_are_uuid_colon_colon_n_with_the_parent_placement() -> None:
    m = profile("dgx-a100")
    text = "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}"
    resource = resource_map.build(m, plugin_config(text=text))["nvidia.com/gpu.shared"]
    first = resource.devices[:4]
    assert [d.id for d in first] == [f"{m.gpus[0].uuid}::{n}" for n in range(4)]
    assert {(d.index, d.numa, d.paths) for d in first} == {("0", 0, ("/dev/nvidia0",))}
    assert (resource.sharing, resource.replicas, resource.is_shared) == ("time-slicing", 4, True)
    assert resource.socket_name == "nvidia-gpu.shared.sock"
    assert resource.fail_requests_greater_than_one is False


def test_selection_by_uuid_and_legacy_mig_uuid() -> None:
    m = profile("a100-mig")
    target = m.gpus[6].mig_devices[1]  # 3g.40gb, GI 2
    legacy = f"MIG-{m.gpus[6].uuid}/{target.gi_id}/{target.ci_id}"
    text = (
        "sharing: {timeSlicing: {resources: ["
        f"{{name: gpu, replicas: 2, rename: gpu.shared, devices: ['{m.gpus[1].uuid}']}},"
        f"{{name: mig-3g.40gb, replicas: 2, rename: mig.shared, devices: ['{legacy}']}}]}}}}"
    )
    built = resource_map.build(m, plugin_config(["--mig-strategy", "mixed"], text=text))
    assert built["nvidia.com/gpu.shared"].physical_ids() == (m.gpus[1].uuid,)
    assert built["nvidia.com/mig.shared"].physical_ids() == (target.uuid,)


SELECTION_ERRORS = [
    ("count_above_available", "devices: 9", "requested 9 devices to be replicated, but only 8 devices available"),
    ("index_not_found", "devices: [9]", "no matching device at index: 9"),
    ("uuid_not_found", "devices: [GPU-00000000-0000-0000-0000-000000000000]",
     "no matching device with UUID: GPU-00000000-0000-0000-0000-000000000000"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("devices_yaml", "message"), [r[1:] for r in SELECTION_ERRORS], ids=[r[0] for r in SELECTION_ERRORS]
)
def test_selections_that_match_nothing_fail_naming_the_device(devices_yaml: str, message: str) -> None:
    text = f"sharing: {{timeSlicing: {{resources: [{{name: gpu, replicas: 2, {devices_yaml}}}]}}}}"
    with pytest.raises(ResourceMapError) as info:
        resource_map.build(profile("dgx-a100"), plugin_config(text=text))
    assert message in str(info.value)
    assert "unable to get IDs of devices to replicate for 'nvidia.com/gpu' resource" in str(info.value)


MPS_LIMITS = [
    ("a100_allows_48", "dgx-a100", 48, None),
    ("a100_refuses_49", "dgx-a100", 49, "maximum allowed replicas exceeded: 49 > 48"),
    ("t4_cc_7_5_allows_48", "pcie-4xt4", 48, None),
    ("v100_cc_7_0_allows_16", "dgx1-v100", 16, None),
    ("v100_cc_7_0_refuses_17", "dgx1-v100", 17,
     "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 17 > 16"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "replicas", "message"), [r[1:] for r in MPS_LIMITS], ids=[r[0] for r in MPS_LIMITS]
)
def test_mps_replica_limits_by_compute_capability(machine_name: str, replicas: int, message: str | None) -> None:
    text = f"sharing: {{mps: {{resources: [{{name: gpu, replicas: {replicas}}}]}}}}"
    cfg = plugin_config(["--mps-root", "/m"], text=text)
    if message is None:
        resource = resource_map.build(profile(machine_name), cfg)["nvidia.com/gpu"]
        assert (resource.sharing, resource.replicas) == ("mps", replicas)
        assert resource.fail_requests_greater_than_one is True
    else:
        with pytest.raises(ResourceMapError, match=message):
            resource_map.build(profile(machine_name), cfg)


def test_mps_is_refused_on_mig_devices() -> None:
    cfg = plugin_config(
        ["--mig-strategy", "single", "--mps-root", "/m"], text="sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}"
    )
    with pytest.raises(ResourceMapError, match="sharing using MPS is not supported for MIG devices"):
        resource_map.build(profile("a100-mig-single"), cfg)


def test_mig_device_paths_come_from_the_minors_table() -> None:
    m = machine({"minor": 2, "mig": ["3g.40gb", "3g.40gb"]})
    minors = mig_caps.parse((FIXTURES / "mig-minors").read_text())
    resource = resource_map.build(m, plugin_config(["--mig-strategy", "single"]), minors)["nvidia.com/gpu"]
    assert resource.devices[0].paths == (
        "/dev/nvidia2",
        "/dev/nvidia-caps/nvidia-cap30",
        "/dev/nvidia-caps/nvidia-cap31",
    )
    assert resource.devices[1].paths == (
        "/dev/nvidia2",
        "/dev/nvidia-caps/nvidia-cap40",
        "/dev/nvidia-caps/nvidia-cap41",
    )
    assert [d.index for d in resource.devices] == ["0:0", "0:1"]


def test_a_mig_device_missing_from_the_minors_table_fails_naming_it() -> None:
    m = machine({"minor": 5, "mig": ["7g.80gb"]})
    with pytest.raises(ResourceMapError, match="no MIG capability minor for gpu5/gi0/access"):
        resource_map.build(m, plugin_config(["--mig-strategy", "mixed"]), mig_caps.parse("config 1\n"))


def test_resources_are_sorted_by_name_and_devices_by_gpu_then_mig_index() -> None:
    built = resource_map.build(profile("a100-mig"), plugin_config(["--mig-strategy", "mixed"]))
    assert list(built.names) == sorted(built.names)
    indices = [d.index for d in built["nvidia.com/mig-1g.10gb"].devices]
    assert indices == [f"2:{j}" for j in range(7)] + [f"3:{j}" for j in range(7)] + ["4:3"]


# --- properties -----------------------------------------------------------------------------

layouts = st.sampled_from(
    [
        ("dgx-a100", "none"),
        ("a100-mig", "mixed"),
        ("a100-mig", "none"),
        ("a100-mig-single", "single"),
        ("pcie-4xt4", "single"),
    ]
)
shares = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["gpu", "mig-1g.10gb", "mig-3g.40gb"]),
            "replicas": st.integers(2, 5),
        },
        optional={"rename": st.sampled_from(["shared", "gpu.shared"]), "devices": st.integers(1, 2)},
    ),
    max_size=2,
    unique_by=lambda e: e["name"],
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(layouts, shares)
def test_every_device_is_advertised_once_and_replica_ids_parse_back(
    layout: tuple[str, str], entries: list[dict[str, object]]
) -> None:
    machine_name, strategy = layout
    text = None
    if entries:
        text = (
            "sharing: {timeSlicing: {resources: ["
            + ",".join("{" + ", ".join(f"{k}: {v}" for k, v in e.items()) + "}" for e in entries)
            + "]}}"
        )
    try:
        built = resource_map.build(profile(machine_name), plugin_config(["--mig-strategy", strategy], text=text))
    except ResourceMapError as exc:
        assert "requested" in str(exc)  # a count larger than the resource: a named error, never a crash
        return
    ids = [d.id for r in built for d in r.devices]
    assert len(ids) == len(set(ids)), "a device is advertised on two resources"
    physical = Counter(naming.strip_replica(i) for i in ids)
    for resource in built:
        assert resource.devices, "resources without devices are not advertised"
        for device in resource.devices:
            annotated = naming.AnnotatedID(device.id)
            uuid, n = annotated.physical, annotated.replica
            assert (uuid, n) == (naming.strip_replica(device.id), device.replica)
            if n is not None:
                assert naming.replica_id(uuid, n) == device.id
                assert 0 <= n < resource.replicas
    # Every physical device appears either once whole or `replicas` times.
    assert all(c == 1 or c >= 2 for c in physical.values())


@pytest.mark.parametrize("name", ["dgx-a100", "a100-mig", "pcie-4xt4"])
def test_by_default_every_gpu_is_one_nvidia_com_gpu_device_mig_enabled_or_not(name: str) -> None:
    machine = profiles.load(name)
    (gpu,) = resource_map.build(machine, plugin_config()).resources
    assert gpu.name == "nvidia.com/gpu"
    assert gpu.socket_name == "nvidia-gpu.sock"
    assert [d.id for d in gpu.devices] == [g.uuid for g in machine.gpus]
    assert set(gpu.by_id) == {g.uuid for g in machine.gpus}


def test_a_machine_without_gpus_has_no_resource_to_register() -> None:
    empty = Machine(name="empty", description="", gpus=(), topology=Topology((), (), (), (), ()))
    assert resource_map.build(empty, plugin_config()).resources == ()
