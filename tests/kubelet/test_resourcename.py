"""Extended resource names: the kubelet's verified rejections and the names plugins really use."""

from __future__ import annotations

import pytest

from kubegpu.kubelet import resourcename

# kubelet-device-manager.md §3, each observed against kubelet 1.32.
VERIFIED_REJECTIONS = [
    ("no-prefix", "gpu"),
    ("kubernetes-io", "kubernetes.io/gpu"),
    ("subdomain-of-kubernetes-io", "foo.kubernetes.io/gpu"),
    ("requests-prefix", "requests.example.com/gpu"),
    ("upper-case-prefix", "Example.com/gpu"),
    ("name-starts-with-dash", "example.com/-gpu"),
    ("two-slashes", "nvidia.com/gpu/x"),
    ("64-char-name", "example.com/" + "a" * 64),
]

ACCEPTED = [
    ("nvidia-gpu", "nvidia.com/gpu"),
    ("mig", "nvidia.com/mig-1g.10gb"),
    ("shared", "nvidia.com/gpu.shared"),
    ("upper-case-name-part", "example.com/GPU"),
    ("63-char-name", "example.com/" + "a" * 63),
    ("underscore-and-dot", "example.com/a_b.c"),
    ("single-char", "example.com/x"),
]


@pytest.mark.parametrize("name", [n for _, n in VERIFIED_REJECTIONS], ids=[i for i, _ in VERIFIED_REJECTIONS])
def test_verified_rejections_are_not_extended_resource_names(name: str) -> None:
    assert not resourcename.is_extended(name)


@pytest.mark.parametrize("name", [n for _, n in ACCEPTED], ids=[i for i, _ in ACCEPTED])
def test_plugin_resource_names_are_extended(name: str) -> None:
    assert resourcename.is_extended(name)


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("cpu", True),
        ("memory", True),
        ("kubernetes.io/x", True),
        ("a.kubernetes.io/x", True),
        ("nvidia.com/gpu", False),
    ],
    ids=["cpu", "memory", "kubernetes-io", "kubernetes-io-subdomain", "nvidia"],
)
def test_native_resources_are_unprefixed_or_in_kubernetes_io(name: str, native: bool) -> None:
    assert resourcename.is_native(name) is native


def test_prefix_length_counts_the_requests_prefix_the_kubelet_adds() -> None:
    # The kubelet validates "requests.<name>" (9 more characters) against the 253-character limit.
    assert resourcename.is_extended("a" * 244 + "/gpu")
    assert not resourcename.is_extended("a" * 245 + "/gpu")


def test_invalid_message_is_the_kubelets_text() -> None:
    assert resourcename.invalid_message("gpu") == 'the ResourceName "gpu" is invalid'
