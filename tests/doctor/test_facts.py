"""Doctor's pure facts: CUDA versions of images, driver compatibility, container runtime configs."""

from __future__ import annotations

import pytest

from kubegpu.doctor import facts


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", (12, 4)),
        ("nvcr.io/nvidia/cuda:11.8.0-runtime-ubi8", (11, 8)),
        ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", (12, 1)),
        ("registry:5000/team/cuda:12.2", (12, 2)),
        ("nvcr.io/nvidia/pytorch:24.05-py3", None),
        ("busybox", None),
    ],
)
def test_the_cuda_version_an_image_tag_names(image: str, cuda: tuple[int, int] | None) -> None:
    assert facts.cuda_of_image(image) == cuda


@pytest.mark.parametrize(
    ("driver", "image", "ok"),
    [((12, 4), (12, 4), True), ((12, 4), (11, 8), True), ((12, 4), (12, 6), False), ((11, 8), (12, 0), False)],
)
def test_an_image_runs_when_the_driver_supports_its_cuda(
    driver: tuple[int, int], image: tuple[int, int], ok: bool
) -> None:
    assert facts.cuda_compatible(driver, image) is ok


def test_a_cuda_version_must_be_major_minor() -> None:
    assert facts.parse_version("12.4.1") == (12, 4)
    with pytest.raises(ValueError, match="'twelve'"):
        facts.parse_version("twelve")


@pytest.mark.parametrize(
    ("config", "how"),
    [
        (
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "runc"\n',
            "nvidia runtime",
        ),
        ('[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = true\n', "CDI"),
        ('[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n', "nvidia runtime"),
        ('[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n', None),
        ("version = 2\n", None),
    ],
    ids=["containerd-nvidia", "containerd-cdi", "crio-nvidia", "cdi-off", "plain"],
)
def test_which_runtime_config_hands_gpus_to_containers(config: str, how: str | None) -> None:
    assert facts.runtime_handles_gpus(config) == how
