"""ctypes layouts of the versioned NVML structs nvidia-ml-py does not define, written from nvml.h.

The v3 GPU- and compute-instance profile infos (driver 545+): v3 is not v2 plus a field, it drops
``isP2pSupported`` from the GPU-instance struct and appends ``capabilities`` to both. The ABI test
checks the fake's C structs against these, as it checks the others against nvidia-ml-py's.
"""

from __future__ import annotations

import ctypes

import pynvml


class GpuInstanceProfileInfoV3(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("id", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("copyEngineCount", ctypes.c_uint),
        ("decoderCount", ctypes.c_uint),
        ("encoderCount", ctypes.c_uint),
        ("jpegCount", ctypes.c_uint),
        ("ofaCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
        ("name", ctypes.c_char * pynvml.NVML_DEVICE_NAME_V2_BUFFER_SIZE),
        ("capabilities", ctypes.c_uint),
    ]


class ComputeInstanceProfileInfoV3(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("id", ctypes.c_uint),
        ("sliceCount", ctypes.c_uint),
        ("instanceCount", ctypes.c_uint),
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
        ("name", ctypes.c_char * pynvml.NVML_DEVICE_NAME_V2_BUFFER_SIZE),
        ("capabilities", ctypes.c_uint),
    ]


#: NVML_STRUCT_VERSION(…, 3): the version in the top byte, the struct's size below.
GI_V3 = (3 << 24) | ctypes.sizeof(GpuInstanceProfileInfoV3)
CI_V3 = (3 << 24) | ctypes.sizeof(ComputeInstanceProfileInfoV3)
