"""Static node filters and kube-scheduler's reason texts."""

from __future__ import annotations

import pytest

from kubegpu.scheduling.live import filters

from .builders import node, pod


@pytest.mark.parametrize(
    ("tolerations", "taint", "reason"),
    [
        ([], {"key": "gpu", "value": "true", "effect": "NoSchedule"}, "node(s) had untolerated taint {gpu: true}"),
        ([{"key": "gpu", "operator": "Exists"}], {"key": "gpu", "value": "x", "effect": "NoSchedule"}, None),
        ([{"key": "gpu", "value": "true"}], {"key": "gpu", "value": "true", "effect": "NoExecute"}, None),
        (
            [{"key": "gpu", "value": "false"}],
            {"key": "gpu", "value": "true", "effect": "NoSchedule"},
            "node(s) had untolerated taint {gpu: true}",
        ),
        ([{"operator": "Exists"}], {"key": "anything", "value": "", "effect": "NoSchedule"}, None),
        (
            [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
            {"key": "gpu", "value": "", "effect": "NoSchedule"},
            "node(s) had untolerated taint {gpu: }",
        ),
        ([], {"key": "soft", "value": "", "effect": "PreferNoSchedule"}, None),
    ],
    ids=["untolerated", "exists", "equal-any-effect", "wrong-value", "tolerate-all", "wrong-effect", "prefer"],
)
def test_taints_and_tolerations(tolerations: list[dict[str, str]], taint: dict[str, str], reason: str | None) -> None:
    p = pod("p", spec={"tolerations": tolerations})
    assert filters.static_reason(p, node("n", taints=[taint])) == reason


def test_the_not_ready_taint_of_a_new_node_keeps_pods_off() -> None:
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    reason = filters.static_reason(pod("p"), node("n", taints=[taint]))
    assert reason == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"


def test_cordoned_nodes_are_unschedulable_unless_tolerated() -> None:
    cordoned = node("n", unschedulable=True)
    assert filters.static_reason(pod("p"), cordoned) == "node(s) were unschedulable"
    tolerating = pod("p", spec={"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]})
    assert filters.static_reason(tolerating, cordoned) is None


def _affinity(*terms: dict[str, object]) -> dict[str, object]:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "gpus": "8"}


@pytest.mark.parametrize(
    ("expressions", "fits"),
    [
        ([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}], True),
        ([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}], False),
        ([{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["Tesla-T4"]}], True),
        ([{"key": "nvidia.com/gpu.product", "operator": "Exists"}], True),
        ([{"key": "nvidia.com/mig.strategy", "operator": "DoesNotExist"}], True),
        ([{"key": "gpus", "operator": "Gt", "values": ["4"]}], True),
        ([{"key": "gpus", "operator": "Lt", "values": ["4"]}], False),
        ([{"key": "gpus", "operator": "Exists"}, {"key": "zone", "operator": "Exists"}], False),
        ([], False),
    ],
    ids=["in", "in-other-model", "notin", "exists", "doesnotexist", "gt", "lt", "all-must-match", "empty-term"],
)
def test_required_node_affinity_operators(expressions: list[dict[str, object]], fits: bool) -> None:
    p = pod("p", spec=_affinity({"matchExpressions": expressions}))
    reason = filters.static_reason(p, node("n", labels=A100))
    assert (reason is None) == fits
    if not fits:
        assert reason == "node(s) didn't match Pod's node affinity/selector"


def test_any_term_may_match_and_fields_match_the_node_name() -> None:
    p = pod(
        "p",
        spec=_affinity(
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
        ),
    )
    assert filters.static_reason(p, node("n")) is None
    assert filters.static_reason(p, node("m")) is not None


def test_node_selector_on_the_gpu_product_label() -> None:
    p = pod("p", spec={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}})
    assert filters.static_reason(p, node("n", labels=A100)) == "node(s) didn't match Pod's node affinity/selector"


def test_a_node_fails_on_the_first_filter_in_kube_scheduler_order() -> None:
    p = pod("p", spec={"nodeSelector": {"x": "y"}})
    n = node("n", unschedulable=True, taints=[{"key": "t", "effect": "NoSchedule"}])
    assert filters.static_reason(p, n) == "node(s) were unschedulable"
