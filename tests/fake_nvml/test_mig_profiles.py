"""MIG profile queries and handles by UUID of the fake libnvidia-ml.so.1, through nvidia-ml-py.

The entry points NVIDIA's plugin needs (``nvmlDeviceGetHandleByUUID``, GPU- and
compute-instance profile info in their unversioned and ``V`` forms, v1/v2/v3
layouts) with NVML's semantics: profile enums in, the board's profile ids out,
NOT_SUPPORTED for a profile the GPU lacks, INVALID_ARGUMENT past the last enum.
Every profile of the simulated backend's table (``gpu/profiles.py``) must read back
the same through the fake, so both backends keep telling one truth.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import pynvml
import pytest

from kubegpu.gpu import errors, profiles
from kubegpu.gpu.nvml import decode
from kubegpu.gpu.nvml.discovery import text
from tests.fake_nvml import harness
from tests.fake_nvml.harness import OpenMachine
from tests.fake_nvml.layouts import CI_V3, GI_V3, ComputeInstanceProfileInfoV3, GpuInstanceProfileInfoV3

pytest_plugins = ["tests.fake_nvml.fixtures"]

#: The profile id each board of these products reports for a GPU-instance profile enum (``mig -lgip``).
BOARD_IDS = {
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE: 19,
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20,
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15,
    pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE: 14,
    pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE: 9,
    pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE: 5,
    pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE: 0,
}


def gi_profiles(handle: Any, version: int = 2) -> dict[int, Any]:
    """Every GPU-instance profile the GPU offers, by enum."""
    out: dict[int, Any] = {}
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            out[enum] = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum, version)
        except pynvml.NVMLError as exc:
            assert exc.value == decode.ERROR_NOT_SUPPORTED, (enum, exc)
    return out


def ci_profiles(gi: Any, version: int = 2) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for enum in range(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        try:
            out[enum] = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, enum, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, version
            )
        except pynvml.NVMLError as exc:
            assert exc.value == decode.ERROR_NOT_SUPPORTED, (enum, exc)
    return out


def error_of(call: Any, *args: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as caught:
        call(*args)
    return int(caught.value.value)


def gpu_instance(handle: Any, mig_index: int) -> Any:
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, mig_index)
    return pynvml.nvmlDeviceGetGpuInstanceById(handle, pynvml.nvmlDeviceGetGpuInstanceId(mig))


@pytest.mark.parametrize("product", sorted(profiles.mig_profiles()))
def test_every_simulated_mig_profile_reads_back_the_same_through_nvml(
    product: str, tmp_path: Path, nvml_machine: OpenMachine
) -> None:
    table = profiles.mig_profiles()[product]
    _, backend = nvml_machine(harness.mig_machine(tmp_path, product, [[]]))
    backend.discover()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    offered = {text(p.name): p for p in gi_profiles(handle).values()}
    for name, spec in table.items():
        gi_name = name.split(".", 1)[1] if name.split(".")[0].endswith("c") else name
        info = offered[f"MIG {gi_name}"]
        assert (info.sliceCount, info.memorySizeMB, info.copyEngineCount) == (
            spec.gi_slices,
            spec.memory_mib,
            spec.copy_engines,
        ), name
        assert (info.decoderCount, info.jpegCount, info.ofaCount) == (
            spec.decoders,
            spec.jpeg_engines,
            spec.ofa_engines,
        ), name
        if spec.ci_slices == spec.gi_slices:
            assert info.multiprocessorCount == spec.multiprocessors, name


@pytest.mark.parametrize("product", sorted(harness.MIG_PRODUCTS))
def test_gpu_instance_profiles_carry_the_boards_ids_and_the_v1_layout_agrees(
    product: str, tmp_path: Path, nvml_machine: OpenMachine
) -> None:
    _, backend = nvml_machine(harness.mig_machine(tmp_path, product, [[]]))
    backend.discover()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    v2, v1 = gi_profiles(handle), gi_profiles(handle, version=1)
    assert {enum: p.id for enum, p in v2.items()} == BOARD_IDS
    instances = {0x0: 7, 0x7: 1, 0x9: 4, 0x1: 3, 0x2: 2, 0x3: 1, 0x4: 1}  # by enum, as mig -lgip lists them
    for enum, p in v2.items():
        assert p.version == pynvml.nvmlGpuInstanceProfileInfo_v2
        assert p.instanceCount == instances[enum]
        assert p.isP2pSupported == 0 and p.encoderCount == 0
        fields = ["id", "sliceCount", "instanceCount", "multiprocessorCount", "copyEngineCount", "memorySizeMB"]
        assert [getattr(v1[enum], f) for f in fields] == [getattr(p, f) for f in fields]
    # the names are go-nvlib's spelling of the same numbers
    memory_bytes = harness.MIG_PRODUCTS[product][0] * 1024 * 1024
    for enum, p in v2.items():
        name = decode.mig_profile_name(enum, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, p.memorySizeMB, memory_bytes)
        if p.sliceCount == 1:
            assert text(p.name) == f"MIG {name}"


def test_a_profile_is_found_by_the_boards_id_too(tmp_path: Path, nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine(harness.mig_machine(tmp_path, "NVIDIA A100-SXM4-80GB", [[]]))
    backend.discover()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    for enum, board_id in BOARD_IDS.items():
        by_id = pynvml.nvmlDeviceGetGpuInstanceProfileInfoById(gpu, board_id)
        by_enum = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, enum)
        assert (by_id.id, text(by_id.name), by_id.memorySizeMB) == (
            by_enum.id,
            text(by_enum.name),
            by_enum.memorySizeMB,
        )
    assert error_of(pynvml.nvmlDeviceGetGpuInstanceProfileInfoById, gpu, 3) == decode.ERROR_NOT_SUPPORTED


def test_profile_info_errors_are_nvmls(tmp_path: Path, nvml_machine: OpenMachine) -> None:
    path = harness.mig_machine(tmp_path, "NVIDIA A100-SXM4-80GB", [["7g.80gb"]])
    _, backend = nvml_machine(path)
    backend.discover()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    query = pynvml.nvmlDeviceGetGpuInstanceProfileInfo
    assert error_of(query, gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT) == decode.ERROR_INVALID_ARGUMENT
    assert error_of(query, gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_8_SLICE) == decode.ERROR_NOT_SUPPORTED
    assert error_of(query, mig, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE) == decode.ERROR_INVALID_ARGUMENT
    gi = gpu_instance(gpu, 0)
    ci_query = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo
    assert error_of(ci_query, gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT, 0) == decode.ERROR_INVALID_ARGUMENT
    assert error_of(ci_query, gi, 0, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT) == decode.ERROR_INVALID_ARGUMENT
    assert error_of(ci_query, gpu, 0, 0) == decode.ERROR_INVALID_ARGUMENT  # a device handle is not a GPU instance


def test_a_gpu_without_mig_offers_no_profiles(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("pcie-4xt4")
    backend.discover()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    for version in (1, 2):
        code = error_of(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, 0, version)
        assert code == decode.ERROR_NOT_SUPPORTED


def test_the_versioned_calls_check_the_stamp_and_fill_the_v3_layout(tmp_path: Path, nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine(harness.mig_machine(tmp_path, "NVIDIA H200", [["7g.141gb"]]))
    backend.discover()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    gi = gpu_instance(gpu, 0)
    gi_v = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetGpuInstanceProfileInfoV")
    ci_v = pynvml._nvmlGetFunctionPointer("nvmlGpuInstanceGetComputeInstanceProfileInfoV")

    wrong = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
    wrong.version = 0x01000098
    assert gi_v(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, ctypes.byref(wrong)) == (
        decode.ERROR_ARGUMENT_VERSION_MISMATCH
    )
    v3 = GpuInstanceProfileInfoV3()
    v3.version = GI_V3
    assert gi_v(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, ctypes.byref(v3)) == decode.SUCCESS
    assert (v3.version, v3.id, v3.sliceCount, v3.memorySizeMB, v3.name, v3.capabilities) == (
        GI_V3,
        0,
        7,
        135424,
        b"MIG 7g.141gb",
        0,
    )
    civ3 = ComputeInstanceProfileInfoV3()
    civ3.version = CI_V3
    civ3.capabilities = 0xFFFF  # the fake must write the whole v3 struct
    assert ci_v(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 0, ctypes.byref(civ3)) == decode.SUCCESS
    assert (civ3.id, civ3.sliceCount, civ3.instanceCount, civ3.name, civ3.capabilities) == (
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
        2,
        3,
        b"MIG 2c.7g.141gb",
        0,
    )


@pytest.mark.parametrize(
    ("product", "layouts", "expected"),
    [
        (
            "NVIDIA A100-SXM4-80GB",
            [["7g.80gb"], ["4g.40gb", "3g.40gb"], ["2g.20gb", "1g.10gb"]],
            [
                # (slices, instances, SMs, name) per offered compute-instance profile enum
                {0: (1, 7, 14, "1c.7g.80gb"), 1: (2, 3, 28, "2c.7g.80gb"), 2: (3, 2, 42, "3c.7g.80gb"),
                 3: (4, 1, 56, "4c.7g.80gb"), 4: (7, 1, 98, "7g.80gb")},
                {0: (1, 4, 14, "1c.4g.40gb"), 1: (2, 2, 28, "2c.4g.40gb"), 3: (4, 1, 56, "4g.40gb")},
                {0: (1, 2, 14, "1c.2g.20gb"), 1: (2, 1, 28, "2g.20gb")},
            ],
        ),
        (
            "NVIDIA H200",
            [["3g.71gb"], ["1g.18gb"]],
            [
                {0: (1, 3, 16, "1c.3g.71gb"), 1: (2, 1, 32, "2c.3g.71gb"), 2: (3, 1, 60, "3g.71gb"),
                 7: (1, 3, 16, "1c.3g.71gb")},
                {0: (1, 1, 16, "1g.18gb"), 7: (1, 1, 16, "1g.18gb")},
            ],
        ),
    ],
    ids=["a100", "h200"],
)  # fmt: skip
def test_compute_instance_profiles_are_those_of_the_gpu_instance_size(
    product: str,
    layouts: list[list[str]],
    expected: list[dict[int, tuple[int, int, int, str]]],
    tmp_path: Path,
    nvml_machine: OpenMachine,
) -> None:
    _, backend = nvml_machine(harness.mig_machine(tmp_path, product, layouts))
    backend.discover()
    for i, want in enumerate(expected):
        gpu = pynvml.nvmlDeviceGetHandleByIndex(i)
        gi_info = pynvml.nvmlGpuInstanceGetInfo(gpu_instance(gpu, 0))
        gi_profile = next(p for p in gi_profiles(gpu).values() if p.id == gi_info.profileId)
        got = ci_profiles(gpu_instance(gpu, 0))
        assert {e: (p.sliceCount, p.instanceCount, p.multiprocessorCount, text(p.name)) for e, p in got.items()} == {
            e: (s, n, sm, f"MIG {name}") for e, (s, n, sm, name) in want.items()
        }
        for enum, p in got.items():
            assert p.id == enum  # compute-instance profile ids are their enums
            shared = (p.sharedCopyEngineCount, p.sharedDecoderCount, p.sharedJpegCount, p.sharedOfaCount)
            assert shared == (
                gi_profile.copyEngineCount,
                gi_profile.decoderCount,
                gi_profile.jpegCount,
                gi_profile.ofaCount,
            )
        v1 = ci_profiles(gpu_instance(gpu, 0), version=1)
        assert {e: (p.id, p.multiprocessorCount) for e, p in v1.items()} == {
            e: (p.id, p.multiprocessorCount) for e, p in got.items()
        }


def test_a_gpu_instance_reports_the_boards_profile_id_and_discovery_walks_back_to_the_enum(
    nvml_machine: OpenMachine,
) -> None:
    _, backend = nvml_machine("a100-mig")
    machine = backend.discover()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(2)  # 7x 1g.10gb
    info = pynvml.nvmlGpuInstanceGetInfo(gpu_instance(gpu, 0))
    assert info.profileId == 19  # not the enum (0), which NVML never reports back
    assert {m.profile for m in machine.gpus[2].mig_devices} == {"1g.10gb"}
    assert [m.profile for m in machine.gpus[7].mig_devices] == ["7g.80gb"]


def test_gpu_instance_placements_count_memory_slices(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("a100-mig")
    machine = backend.discover()
    placements = {}
    for gpu in (2, 4, 5, 6, 7):
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        infos = [
            pynvml.nvmlGpuInstanceGetInfo(gpu_instance(handle, j)) for j in range(len(machine.gpus[gpu].mig_devices))
        ]
        placements[gpu] = [(i.placement.start, i.placement.size) for i in infos]
    assert placements == {
        2: [(j, 1) for j in range(7)],  # 7x 1g.10gb
        4: [(0, 2), (2, 2), (4, 2), (6, 1)],  # 3x 2g.20gb + 1g.10gb
        5: [(0, 4), (4, 4)],  # 2x 3g.40gb: four of the eight memory slices each
        6: [(0, 4), (4, 4)],  # 4g.40gb + 3g.40gb
        7: [(0, 8)],  # 7g.80gb
    }


def test_a_mig_device_that_disagrees_with_its_profile_stops_nvml_from_starting(
    tmp_path: Path, nvml_machine: OpenMachine, capfd: pytest.CaptureFixture[str]
) -> None:
    exported = json.loads(profiles.export_json(profiles.load("a100-mig")))
    exported["gpus"][7]["mig_devices"][0]["memory_mib"] = 81000
    path = tmp_path / "bad-mig.json"
    path.write_text(json.dumps(exported))
    _, backend = nvml_machine(profiles.load(str(path)))
    with pytest.raises(errors.NvmlUnavailable) as caught:
        backend.discover()
    assert caught.value.code == decode.ERROR_UNKNOWN
    assert "disagrees with the 7g.80gb profile" in capfd.readouterr().err


def test_handles_by_uuid_are_the_handles_by_index(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("a100-mig")
    machine = backend.discover()

    def key(handle: Any) -> int | None:
        return ctypes.cast(handle, ctypes.c_void_p).value

    for gpu in machine.gpus:
        by_index = pynvml.nvmlDeviceGetHandleByIndex(gpu.index)
        assert key(pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid)) == key(by_index)
        for mig in gpu.mig_devices:
            want = key(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(by_index, mig.index))
            assert key(pynvml.nvmlDeviceGetHandleByUUID(mig.uuid)) == want
            assert key(pynvml.nvmlDeviceGetHandleByUUIDV(mig.uuid, pynvml.NVML_UUID_TYPE_ASCII)) == want
    first = machine.gpus[0].uuid
    binary = bytes.fromhex(first.split("-", 1)[1].replace("-", ""))
    by_binary = pynvml.nvmlDeviceGetHandleByUUIDV(binary, pynvml.NVML_UUID_TYPE_BINARY)
    assert key(by_binary) == key(pynvml.nvmlDeviceGetHandleByIndex(0))
    unknown = "GPU-00000000-0000-0000-0000-000000000000"
    assert error_of(pynvml.nvmlDeviceGetHandleByUUID, unknown) == decode.ERROR_NOT_FOUND
