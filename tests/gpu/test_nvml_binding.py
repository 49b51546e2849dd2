"""kubegpu's NVML binding: its struct layouts, sizes and enums are nvidia-ml-py's, and its errors are NVML's."""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml
import pytest

from kubegpu.gpu.nvml import binding, decode
from tests.fake_nvml.harness import OpenMachine

pytest_plugins = ["tests.fake_nvml.fixtures"]

#: (ours, nvidia-ml-py's) for every struct the binding fills.
LAYOUTS: list[tuple[Any, Any]] = [
    (binding.PciInfo, pynvml.nvmlPciInfo_t),
    (binding.Memory, pynvml.c_nvmlMemory_t),
    (binding.MemoryV2, pynvml.c_nvmlMemory_v2_t),
    (binding.DeviceAttributes, pynvml.c_nvmlDeviceAttributes),
    (binding.Placement, pynvml.c_nvmlGpuInstancePlacement_t),
    (binding.Placement, pynvml.c_nvmlComputeInstancePlacement_t),
    (binding.GpuInstanceInfo, pynvml.c_nvmlGpuInstanceInfo_t),
    (binding.ComputeInstanceInfo, pynvml.c_nvmlComputeInstanceInfo_t),
    (binding.GpuInstanceProfileInfo, pynvml.c_nvmlGpuInstanceProfileInfo_t),
    (binding.GpuInstanceProfileInfoV2, pynvml.c_nvmlGpuInstanceProfileInfo_v2_t),
    (binding.ComputeInstanceProfileInfo, pynvml.c_nvmlComputeInstanceProfileInfo_t),
    (binding.ComputeInstanceProfileInfoV2, pynvml.c_nvmlComputeInstanceProfileInfo_v2_t),
    (binding.GpuFabricInfo, pynvml.c_nvmlGpuFabricInfo_t),
    (binding.EventData, pynvml.c_nvmlEventData_t),
    (binding.Utilization, pynvml.c_nvmlUtilization_t),
    (binding.ViolationTime, pynvml.c_nvmlViolationTime_t),
    (binding.Value, pynvml.c_nvmlValue_t),
    (binding.FieldValue, pynvml.c_nvmlFieldValue_t),
]


#: Fields whose C type nvidia-ml-py widens: nvml.h declares ``nvmlGpuFabricState_t`` as ``unsigned char``
#: (the byte after it is padding a driver need not clear), nvidia-ml-py reads four bytes.
WIDENED = {("c_nvmlGpuFabricInfo_t", "state"): 1}


def layout(struct: Any, reference: Any) -> list[tuple[str, int, int]]:
    out = []
    for name, *_ in struct._fields_:
        field = getattr(struct, name)
        out.append((name, field.offset, WIDENED.get((reference.__name__, name), field.size)))
    return out


@pytest.mark.parametrize(("ours", "reference"), LAYOUTS, ids=[r.__name__ for _, r in LAYOUTS])
def test_every_struct_has_nvidia_ml_pys_size_and_field_offsets(ours: Any, reference: Any) -> None:
    assert ctypes.sizeof(ours) == ctypes.sizeof(reference)
    assert ctypes.alignment(ours) == ctypes.alignment(reference)
    assert layout(ours, reference) == layout(reference, reference)


def test_sizes_enums_and_version_stamps_are_nvidia_ml_pys() -> None:
    names = [
        n for n in vars(binding) if n.isupper() and isinstance(getattr(binding, n), int) and not n.endswith("_VERSION")
    ]
    assert len(names) > 30
    for name in names:
        assert getattr(binding, name) == getattr(pynvml, f"NVML_{name}"), name
    assert pynvml.nvmlMemory_v2 == binding.MEMORY_V2_VERSION
    assert pynvml.nvmlGpuInstanceProfileInfo_v2 == binding.GPU_INSTANCE_PROFILE_INFO_V2_VERSION
    assert pynvml.nvmlComputeInstanceProfileInfo_v2 == binding.COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION


def test_every_entry_point_the_binding_calls_is_exported_by_the_fake_library(nvml_machine: OpenMachine) -> None:
    import inspect
    import re

    _, backend = nvml_machine("dgx-a100")
    backend.discover()
    library = binding.loaded()
    assert library is not None
    fields = {name for struct, _ in LAYOUTS for name, *_ in struct._fields_}
    called = set(re.findall(r'"(nvml[A-Z][A-Za-z0-9_]+)"', inspect.getsource(binding))) - fields
    assert len(called) > 50
    missing = sorted(name for name in called if not hasattr(library, name))
    assert missing == []


def test_a_symbol_the_library_lacks_is_function_not_found_and_a_failed_call_carries_nvmls_text(
    nvml_machine: OpenMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, backend = nvml_machine("dgx-a100")
    backend.discover()
    real = binding.loaded()

    class WithoutTopology:
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlDeviceGetTopologyCommonAncestor":
                raise AttributeError(name)
            return getattr(real, name)

    handle = binding.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(binding.NvmlError) as invalid:
        binding.nvmlDeviceGetHandleByIndex(4096)
    assert invalid.value.code == decode.ERROR_INVALID_ARGUMENT
    assert str(invalid.value) == pynvml.nvmlErrorString(decode.ERROR_INVALID_ARGUMENT)
    monkeypatch.setattr(binding, "_library", WithoutTopology())
    with pytest.raises(binding.NvmlError) as missing:
        binding.nvmlDeviceGetTopologyCommonAncestor(handle, handle)
    assert missing.value.code == decode.ERROR_FUNCTION_NOT_FOUND


def test_a_call_before_the_library_is_loaded_is_uninitialized(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "_library", None)
    with pytest.raises(binding.NvmlError) as caught:
        binding.nvmlDeviceGetCount()
    assert caught.value.code == decode.ERROR_UNINITIALIZED
    assert str(caught.value) == f"NVML error {decode.ERROR_UNINITIALIZED}"
