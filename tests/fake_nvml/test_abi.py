"""The fake library's struct layouts are nvidia-ml-py's: a C program prints sizes and offsets, ctypes must agree."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pynvml
import pytest

from tests.fake_nvml import harness, layouts

#: (C struct, pynvml ctypes struct, fields to check)
STRUCTS = [
    ("nvmlPciInfo_t", pynvml.nvmlPciInfo_t, ["busIdLegacy", "domain", "pciSubSystemId", "busId"]),
    ("nvmlMemory_t", pynvml.c_nvmlMemory_t, ["total", "free", "used"]),
    ("nvmlMemory_v2_t", pynvml.c_nvmlMemory_v2_t, ["version", "total", "reserved", "free", "used"]),
    ("nvmlDeviceAttributes_t", pynvml.c_nvmlDeviceAttributes, ["multiprocessorCount", "memorySizeMB"]),
    ("nvmlGpuInstanceInfo_t", pynvml.c_nvmlGpuInstanceInfo_t, ["device", "id", "profileId", "placement"]),
    ("nvmlComputeInstanceInfo_t", pynvml.c_nvmlComputeInstanceInfo_t, ["gpuInstance", "id", "profileId"]),
    ("nvmlEventData_t", pynvml.c_nvmlEventData_t, ["eventType", "eventData", "gpuInstanceId", "computeInstanceId"]),
    ("nvmlUtilization_t", pynvml.c_nvmlUtilization_t, ["gpu", "memory"]),
    ("nvmlViolationTime_t", pynvml.c_nvmlViolationTime_t, ["referenceTime", "violationTime"]),
    ("nvmlFieldValue_t", pynvml.c_nvmlFieldValue_t, ["scopeId", "timestamp", "valueType", "nvmlReturn", "value"]),
    ("nvmlGpuInstanceProfileInfo_t", pynvml.c_nvmlGpuInstanceProfileInfo_t, ["id", "ofaCount", "memorySizeMB"]),
    ("nvmlGpuInstanceProfileInfo_v2_t", pynvml.c_nvmlGpuInstanceProfileInfo_v2_t, ["id", "memorySizeMB", "name"]),
    (
        "nvmlGpuInstanceProfileInfo_v3_t",
        layouts.GpuInstanceProfileInfoV3,
        ["id", "memorySizeMB", "name", "capabilities"],
    ),
    ("nvmlComputeInstanceProfileInfo_t", pynvml.c_nvmlComputeInstanceProfileInfo_t, ["id", "sharedOfaCount"]),
    ("nvmlComputeInstanceProfileInfo_v2_t", pynvml.c_nvmlComputeInstanceProfileInfo_v2_t, ["id", "name"]),
    ("nvmlComputeInstanceProfileInfo_v3_t", layouts.ComputeInstanceProfileInfoV3, ["id", "name", "capabilities"]),
    ("nvmlUUID_t", pynvml.c_nvmlUUID_t, ["version", "type", "value"]),
    ("nvmlGpuFabricInfo_t", pynvml.c_nvmlGpuFabricInfo_t, ["clusterUuid", "status", "cliqueId", "state"]),
]

#: (C macro, the version stamp nvidia-ml-py or nvml.h gives it)
VERSIONS = [
    ("NVML_MEMORY_V2_VERSION", pynvml.nvmlMemory_v2),
    ("NVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION", pynvml.nvmlGpuInstanceProfileInfo_v2),
    ("NVML_GPU_INSTANCE_PROFILE_INFO_V3_VERSION", layouts.GI_V3),
    ("NVML_COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION", pynvml.nvmlComputeInstanceProfileInfo_v2),
    ("NVML_COMPUTE_INSTANCE_PROFILE_INFO_V3_VERSION", layouts.CI_V3),
    ("NVML_UUID_V1_VERSION", pynvml.nvmlUUID_v1),
    ("NVML_GPU_INSTANCE_PROFILE_COUNT", pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT),
    ("NVML_COMPUTE_INSTANCE_PROFILE_COUNT", pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT),
]


def test_struct_sizes_and_offsets_match_nvidia_ml_py(tmp_path: Path) -> None:
    cc = harness.compiler()
    if cc is None:
        pytest.skip("no C compiler (cc) to build the ABI probe")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "nvml_abi.h"', "int main(void) {"]
    for c_name, _, names in STRUCTS:
        lines.append(f'printf("{c_name} size %zu\\n", sizeof({c_name}));')
        lines += [f'printf("{c_name} {n} %zu\\n", offsetof({c_name}, {n}));' for n in names]
    lines += [f'printf("{macro} %zu\\n", (size_t){macro});' for macro, _ in VERSIONS]
    lines += ["return 0;", "}"]
    source = tmp_path / "abi.c"
    source.write_text("\n".join(lines) + "\n")
    binary = tmp_path / "abi"
    subprocess.run([cc, "-I", str(harness.FAKE_DIR), "-o", str(binary), str(source)], check=True)
    printed = dict(
        (line.rsplit(" ", 1)[0], int(line.rsplit(" ", 1)[1]))
        for line in subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.splitlines()
    )
    expected: dict[str, int] = {}
    for c_name, py_struct, names in STRUCTS:
        expected[f"{c_name} size"] = ctypes.sizeof(py_struct)
        expected.update({f"{c_name} {n}": getattr(py_struct, n).offset for n in names})
    expected.update({macro: value for macro, value in VERSIONS})
    assert printed == expected
    assert pynvml.nvmlMemory_v2 == (2 << 24) | ctypes.sizeof(pynvml.c_nvmlMemory_v2_t)


def test_build_script_builds_the_library_into_the_given_directory(tmp_path: Path) -> None:
    if harness.compiler() is None or shutil.which("sh") is None:
        pytest.skip("no C compiler (cc) to build the fake libnvidia-ml.so.1")
    subprocess.run(["sh", str(harness.FAKE_DIR / "build.sh"), str(tmp_path / "out")], check=True)
    library = tmp_path / "out" / "libnvidia-ml.so.1"
    assert library.is_file()
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    if exported.returncode == 0:
        names = {line.split()[-1] for line in exported.stdout.splitlines()}
        assert {"nvmlInitWithFlags", "nvmlEventSetWait_v2", "nvmlDeviceGetPciInfo_v3"} <= names
        # what NVIDIA's plugin needs beyond our backend: its health checker and MIG strategies
        assert {
            "nvmlDeviceGetHandleByUUID",
            "nvmlDeviceGetHandleByUUIDV",
            "nvmlDeviceGetGpuInstanceProfileInfo",
            "nvmlDeviceGetGpuInstanceProfileInfoV",
            "nvmlDeviceGetGpuInstanceProfileInfoByIdV",
            "nvmlGpuInstanceGetComputeInstanceProfileInfo",
            "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
        } <= names
        assert all(n.startswith("nvml") for n in names), "only NVML entry points are exported"
    cuda = tmp_path / "out" / "libcuda.so.1"
    assert cuda.is_file()
    exported = subprocess.run(["nm", "-D", "--defined-only", str(cuda)], capture_output=True, text=True)
    if exported.returncode == 0:
        assert not [line for line in exported.stdout.splitlines() if line.split()[-1].startswith("cu")]
