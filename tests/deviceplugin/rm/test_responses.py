"""Allocate responses for every device-list strategy, as NVIDIA builds them (reference section d)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.rm import resource_map, responses
from kubegpu.deviceplugin.rm.devices import Device
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.deviceplugin.rm.resources import Resource as PlainResource
from kubegpu.deviceplugin.rm.responses import ContainerEdits, DeviceSpec, Mount
from tests.deviceplugin.fixtures.build import plugin_config, profile

DGX = profile("dgx-a100")
G = [g.uuid for g in DGX.gpus]
VENDOR = "k8s.device-plugin.nvidia.com"


def gpus(argv: Sequence[str] = (), text: str | None = None, name: str = "nvidia.com/gpu") -> Resource:
    return resource_map.build(DGX, plugin_config(list(argv), text=text))[name]


def edits(
    resource: Resource,
    ids: Sequence[str],
    argv: Sequence[str] = (),
    present: Sequence[str] = (),
    cdi_features: tuple[str, ...] = (),
) -> ContainerEdits:
    options = responses.ResponseOptions.from_config(plugin_config(list(argv)), cdi_features=cdi_features)
    return responses.container_edits(resource, ids, options, exists=lambda p: p in present, new_uuid=lambda: "U-1")


def test_default_is_envvar_with_uuids() -> None:
    assert edits(gpus(), [G[0]]) == ContainerEdits(envs={"NVIDIA_VISIBLE_DEVICES": G[0]})


def test_replica_ids_are_stripped_and_deduplicated_in_request_order() -> None:
    shared = gpus(text="sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}")
    got = edits(shared, [f"{G[3]}::1", f"{G[0]}::0", f"{G[3]}::2"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == f"{G[3]},{G[0]}"


def test_index_strategy_passes_nvidia_indices_in_request_order() -> None:
    got = edits(gpus(), [G[5], G[1]], ["--device-id-strategy", "index"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == "5,1"


def test_index_strategy_for_mig_devices_is_parent_colon_mig_index() -> None:
    machine = profile("a100-mig")
    resource = resource_map.build(machine, plugin_config(["--mig-strategy", "mixed"]))["nvidia.com/mig-3g.40gb"]
    got = edits(resource, [machine.gpus[6].mig_devices[1].uuid], ["--device-id-strategy", "index"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == "6:1"


VOLUME_MOUNTS = (
    Mount("/var/run/nvidia-container-devices/{0}", "/dev/null"),
    Mount("/var/run/nvidia-container-devices/{1}", "/dev/null"),
)
STRATEGIES = [
    ("volume_mounts", "volume-mounts",
     {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"},
     VOLUME_MOUNTS,
     {}, ()),
    ("envvar_and_volume_mounts_keeps_the_mount_dir", "envvar,volume-mounts",
     {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"},
     VOLUME_MOUNTS,
     {}, ()),
    ("cdi_annotations", "cdi-annotations", {}, (),
     {"cdi.k8s.io/nvidia-device-plugin_U-1": f"{VENDOR}/gpu={{0}},{VENDOR}/gpu={{1}}"}, ()),
    ("cdi_cri", "cdi-cri", {}, (), {}, (f"{VENDOR}/gpu={{0}}", f"{VENDOR}/gpu={{1}}")),
    ("cdi_both", "cdi-annotations,cdi-cri", {}, (),
     {"cdi.k8s.io/nvidia-device-plugin_U-1": f"{VENDOR}/gpu={{0}},{VENDOR}/gpu={{1}}"},
     (f"{VENDOR}/gpu={{0}}", f"{VENDOR}/gpu={{1}}")),
    ("envvar_and_cdi_cri", "envvar,cdi-cri", {"NVIDIA_VISIBLE_DEVICES": "{0},{1}"}, (), {},
     (f"{VENDOR}/gpu={{0}}", f"{VENDOR}/gpu={{1}}")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("strategy", "envs", "mounts", "annotations", "cdi"), [r[1:] for r in STRATEGIES], ids=[r[0] for r in STRATEGIES]
)
def test_device_list_strategies_and_combinations(
    strategy: str,
    envs: dict[str, str],
    mounts: tuple[Mount, ...],
    annotations: dict[str, str],
    cdi: tuple[str, ...],
) -> None:
    got = edits(gpus(), [G[0], G[1]], ["--device-list-strategy", strategy])

    def fill(text: str) -> str:
        return text.format(G[0], G[1])

    assert got.envs == {k: fill(v) for k, v in envs.items()}
    assert got.mounts == tuple(Mount(fill(m.container_path), m.host_path) for m in mounts)
    assert got.annotations == {k: fill(v) for k, v in annotations.items()}
    assert got.cdi_devices == tuple(fill(c) for c in cdi)
    assert got.devices == ()


def test_cdi_names_follow_the_index_strategy() -> None:
    got = edits(gpus(), [G[2]], ["--device-list-strategy", "cdi-cri", "--device-id-strategy", "index"])
    assert got.cdi_devices == (f"{VENDOR}/gpu=2",)


def test_custom_annotation_prefix_replaces_cdi_k8s_io() -> None:
    got = edits(gpus(), [G[0]], ["--device-list-strategy", "cdi-annotations", "--cdi-annotation-prefix", "example.io/"])
    assert list(got.annotations) == ["example.io/nvidia-device-plugin_U-1"]


def test_every_call_gets_a_fresh_annotation_uuid() -> None:
    resource = gpus()
    options = responses.ResponseOptions(device_list_strategies=("cdi-annotations",))
    keys = {
        key
        for _ in range(3)
        for key in responses.container_edits(resource, [G[0]], options, exists=lambda p: False).annotations
    }
    assert len(keys) == 3
    assert all(re.fullmatch(r"cdi\.k8s\.io/nvidia-device-plugin_[0-9a-f-]{36}", k) for k in keys)


def test_pass_device_specs_gives_present_control_nodes_then_gpu_nodes_under_the_dev_root() -> None:
    got = edits(
        gpus(),
        [G[3], G[0]],
        ["--pass-device-specs", "--dev-root", "/run/nvidia/driver"],
        present=["/dev/nvidiactl", "/dev/nvidia-uvm"],
    )
    assert got.devices == (
        DeviceSpec("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl", "rw"),
        DeviceSpec("/dev/nvidia-uvm", "/run/nvidia/driver/dev/nvidia-uvm", "rw"),
        DeviceSpec("/dev/nvidia3", "/run/nvidia/driver/dev/nvidia3", "rw"),
        DeviceSpec("/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0", "rw"),
    )


def test_pass_device_specs_for_mig_devices_adds_capability_nodes() -> None:
    machine = profile("a100-mig")
    resource = resource_map.build(machine, plugin_config(["--mig-strategy", "mixed"]))["nvidia.com/mig-7g.80gb"]
    got = edits(resource, [machine.gpus[7].mig_devices[0].uuid], ["--pass-device-specs"])
    assert [d.container_path for d in got.devices] == list(resource.devices[0].paths)
    assert got.devices[1].container_path.startswith("/dev/nvidia-caps/nvidia-cap")


def test_two_replicas_of_one_gpu_give_its_node_once() -> None:
    shared = gpus(text="sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}")
    got = edits(shared, [f"{G[1]}::0", f"{G[1]}::1"], ["--pass-device-specs"])
    assert [d.container_path for d in got.devices] == ["/dev/nvidia1"]


def test_pass_device_specs_is_ignored_when_every_strategy_is_cdi() -> None:
    got = edits(
        gpus(), [G[0]], ["--pass-device-specs", "--device-list-strategy", "cdi-cri"], present=["/dev/nvidiactl"]
    )
    assert got.devices == () and "NVIDIA_VISIBLE_DEVICES" not in got.envs


FEATURES = [
    ("gdrcopy", ["--gdrcopy-enabled"], {"NVIDIA_GDRCOPY": "enabled"}),
    ("gds", ["--gds-enabled"], {"NVIDIA_GDS": "enabled"}),
    ("mofed", ["--mofed-enabled"], {"NVIDIA_MOFED": "enabled"}),
]


@pytest.mark.parametrize(("argv", "env"), [r[1:] for r in FEATURES], ids=[r[0] for r in FEATURES])
def test_feature_env_is_set_for_every_strategy(argv: list[str], env: dict[str, str]) -> None:
    assert edits(gpus(), [G[0]], argv).envs == {"NVIDIA_VISIBLE_DEVICES": G[0], **env}
    assert edits(gpus(), [G[0]], [*argv, "--device-list-strategy", "cdi-cri"]).envs == env


def test_feature_cdi_devices_only_when_their_spec_is_not_empty() -> None:
    argv = ["--gdrcopy-enabled", "--gds-enabled", "--device-list-strategy", "cdi-cri"]
    got = edits(gpus(), [G[0]], argv, cdi_features=("gds",))
    assert got.cdi_devices == (f"{VENDOR}/gpu={G[0]}", f"{VENDOR}/gds=all")


def test_imex_channels_in_every_form() -> None:
    argv = ["--imex-channel-ids", "0", "--device-list-strategy", "envvar,volume-mounts,cdi-cri", "--pass-device-specs"]
    got = edits(gpus(), [G[0]], argv)
    assert got.envs["NVIDIA_IMEX_CHANNELS"] == "0"
    assert Mount("/var/run/nvidia-container-devices/imex/0", "/dev/null") in got.mounts
    assert got.devices[-1] == DeviceSpec(
        "/dev/nvidia-caps-imex-channels/channel0", "/dev/nvidia-caps-imex-channels/channel0", "rw"
    )
    assert got.cdi_devices[-1] == f"{VENDOR}/imex-channel=0"


def test_mps_sets_the_pipe_directory_and_mounts_pipe_and_shm() -> None:
    text = "sharing: {mps: {failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 4}]}}"
    resource = resource_map.build(DGX, plugin_config(["--mps-root", "/run/nvidia/mps"], text=text))["nvidia.com/gpu"]
    options = responses.ResponseOptions.from_config(plugin_config(["--mps-root", "/run/nvidia/mps"], text=text))
    got = responses.container_edits(resource, [f"{G[0]}::1"], options, exists=lambda p: False)
    assert got.envs == {"CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe", "NVIDIA_VISIBLE_DEVICES": G[0]}
    assert got.mounts == (
        Mount("/mps/nvidia.com/gpu/pipe", "/run/nvidia/mps/nvidia.com/gpu/pipe"),
        Mount("/dev/shm", "/run/nvidia/mps/shm"),
    )
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in got.envs


ERRORS = [
    ("unknown_device", None, ["GPU-nope"],
     'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: GPU-nope'),
    ("two_replicas_with_fail_requests", "sharing: {timeSlicing: {failRequestsGreaterThanOne: true, "
     "renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}", ["{0}::0", "{1}::0"],
     'invalid allocation request for "nvidia.com/gpu.shared": invalid request: '
     "maximum request size for shared resources is 1; found 2"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "ids", "message"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_bad_requests_get_nvidia_error_texts(text: str | None, ids: list[str], message: str) -> None:
    name = "nvidia.com/gpu.shared" if text and "renameByDefault" in text else "nvidia.com/gpu"
    resource = gpus(text=text, name=name)
    with pytest.raises(InvalidRequest) as info:
        edits(resource, [i.format(G[0], G[1]) for i in ids])
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("fail", "ok"),
    [("true", False), ("false", True)],
    ids=["refused_when_fail_requests_is_true", "allowed_when_false"],
)
def test_fail_requests_greater_than_one(fail: str, ok: bool) -> None:
    text = f"sharing: {{timeSlicing: {{failRequestsGreaterThanOne: {fail}, resources: [{{name: gpu, replicas: 2}}]}}}}"
    resource = gpus(text=text)
    ids = [f"{G[0]}::0", f"{G[0]}::1"]
    if ok:
        assert edits(resource, ids).envs["NVIDIA_VISIBLE_DEVICES"] == G[0]
    else:
        with pytest.raises(InvalidRequest):
            edits(resource, ids)
    assert edits(resource, [f"{G[1]}::0"]).envs["NVIDIA_VISIBLE_DEVICES"] == G[1]


@given(st.lists(st.sampled_from([f"{g}::{n}" for g in G[:3] for n in range(3)]), min_size=1, max_size=8))
def test_runtime_ids_are_unique_physical_ids_of_the_request(ids: list[str]) -> None:
    shared = gpus(text="sharing: {timeSlicing: {resources: [{name: gpu, replicas: 3}]}}")
    got = edits(shared, ids).envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(got) == len(set(got))
    assert set(got) == {i.split("::")[0] for i in ids}
    assert got[0] == ids[0].split("::")[0]


# --- validation and the whole call, on a plain (unshared) resource --------------------------------------------

PLAIN = PlainResource(
    "nvidia.com/gpu",
    tuple(Device(id=f"GPU-{n}", gpu_uuid=f"GPU-{n}", gpu_index=n, index=str(n), numa=n // 2) for n in range(4)),
)


def plain(requests: Sequence[Sequence[str]]) -> list[ContainerEdits]:
    return responses.allocate_all(PLAIN, requests, responses.ResponseOptions(), exists=lambda p: False)


def test_a_replica_id_of_a_whole_gpu_resource_is_unknown() -> None:
    with pytest.raises(InvalidRequest, match="unknown device: GPU-0::0"):
        plain([["GPU-0::0"]])


def test_an_empty_container_request_gets_nvidias_response_for_no_devices() -> None:
    # NVIDIA's ValidateRequest accepts it and getAllocateResponse joins zero IDs.
    (edits,) = plain([[]])
    assert edits == responses.ContainerEdits(envs={"NVIDIA_VISIBLE_DEVICES": ""})


def test_the_first_unknown_id_is_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        plain([["GPU-0", "GPU-9", "GPU-8"]])
    assert str(caught.value).endswith("unknown device: GPU-9")


def test_one_response_per_container_request_in_order() -> None:
    result = plain([["GPU-2"], ["GPU-0", "GPU-1"], ["GPU-3"]])
    assert [e.envs["NVIDIA_VISIBLE_DEVICES"] for e in result] == ["GPU-2", "GPU-0,GPU-1", "GPU-3"]


def test_no_container_requests_give_no_responses() -> None:
    assert plain([]) == []


def test_one_bad_container_request_fails_the_whole_call() -> None:
    with pytest.raises(InvalidRequest, match="GPU-7"):
        plain([["GPU-0"], ["GPU-7"]])


@given(st.lists(st.one_of(st.sampled_from([d.id for d in PLAIN.devices]), st.text(max_size=12)), max_size=20))
def test_any_unknown_id_is_refused_naming_the_first_one(requested: list[str]) -> None:
    unknown = [i for i in requested if i not in PLAIN.by_id]
    if not unknown:
        (got,) = plain([requested])
        assert got.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(dict.fromkeys(requested))
        return
    with pytest.raises(InvalidRequest) as caught:
        plain([requested])
    assert str(caught.value).endswith(f"unknown device: {unknown[0]}")


def test_the_cdi_annotation_uuid_is_a_random_version_4_uuid() -> None:
    import uuid

    values = {responses.random_uuid() for _ in range(200)}
    assert len(values) == 200
    for value in values:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
