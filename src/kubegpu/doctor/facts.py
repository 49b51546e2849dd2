"""Pure facts doctor decides on: can an image's CUDA run on this driver, which CUDA an image carries, and whether a
container runtime's config hands GPUs to containers (the NVIDIA runtime or CDI). Must do no I/O.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")
_LEADING = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?(?:-|$)")  # nvidia/cuda:12.4.1-base-ubuntu22.04
_EMBEDDED = re.compile(r"cuda(\d+)\.(\d+)")  # pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime


def parse_version(text: str) -> tuple[int, int]:
    """``12.4`` or ``12.4.1`` → (12, 4); ValueError naming the text otherwise."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"not a CUDA version (MAJOR.MINOR[.PATCH]): {text!r}")
    return int(match.group(1)), int(match.group(2))


def cuda_of_image(image: str) -> tuple[int, int] | None:
    """The CUDA version an image's tag names (``nvidia/cuda:12.4.1-runtime-ubuntu22.04`` → (12, 4)), else None."""
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    name, tag = last.split(":", 1)
    match = _EMBEDDED.search(tag) or (_LEADING.match(tag) if "cuda" in name else None)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cuda_compatible(driver_cuda: tuple[int, int], image_cuda: tuple[int, int]) -> bool:
    """A CUDA X.Y application needs a driver whose CUDA driver API version is at least X.Y."""
    return driver_cuda >= image_cuda


def runtime_handles_gpus(config: str) -> str | None:
    """What in a containerd (TOML) or CRI-O config hands GPUs to containers: ``nvidia runtime``, ``CDI``, or None."""
    if re.search(
        r"nvidia-container-runtime|runtimes\.(?:\"nvidia\"|nvidia)\b|\[crio\.runtime\.runtimes\.nvidia", config
    ):
        return "nvidia runtime"
    if re.search(r"^\s*enable_cdi\s*=\s*true", config, re.MULTILINE) or re.search(
        r"^\s*cdi_spec_dirs\s*=", config, re.MULTILINE
    ):
        return "CDI"
    return None
