"""Pod and node resource arithmetic as kube-scheduler counts it."""

from __future__ import annotations

import pytest
from lightkube.resources.core_v1 import Pod

from kubegpu.scheduling.live import objects, resources

from .builders import GI


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "100m", 100),
        ("cpu", "1.5", 1500),
        ("cpu", "0.0001", 1),  # rounded up to a millicore, as Kubernetes does
        ("memory", "1Gi", GI),
        ("memory", "1G", 10**9),
        ("memory", "1.5Ki", 1536),
        ("nvidia.com/gpu", "4", 4),
    ],
    ids=["milli", "fraction", "round-up", "Gi", "G", "Ki", "gpu"],
)
def test_quantities_convert_to_scheduler_units(resource: str, value: str, expected: int) -> None:
    assert resources.quantity(resource, value) == expected


def test_a_malformed_quantity_names_resource_and_value() -> None:
    with pytest.raises(resources.QuantityError, match=r"resource cpu: invalid quantity '12x'"):
        resources.quantity("cpu", "12x")


def _pod(spec: dict[str, object]) -> objects.PodInfo:
    return objects.pod_info(
        Pod.from_dict({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], **spec}})
    )


def _c(name: str, **requests: str) -> dict[str, object]:
    return {"name": name, "image": "x", "resources": {"requests": requests}}


def test_requests_sum_containers_and_take_the_largest_init_container() -> None:
    p = _pod(
        {
            "containers": [_c("a", cpu="1", memory="1Gi"), _c("b", cpu="500m")],
            "initContainers": [_c("init", cpu="4", memory="512Mi")],
        }
    )
    assert p.requests == {"cpu": 4000, "memory": GI}


def test_sidecar_init_containers_add_to_the_pod_and_to_later_init_containers() -> None:
    sidecar = {**_c("sidecar", cpu="1"), "restartPolicy": "Always"}
    p = _pod({"containers": [_c("a", cpu="2")], "initContainers": [sidecar, _c("later", cpu="2500m")]})
    # containers 2 + sidecar 1 = 3; the later init container runs beside the sidecar: 2.5 + 1 = 3.5.
    assert p.requests["cpu"] == 3500


def test_overhead_is_added_and_limits_stand_in_for_missing_requests() -> None:
    container = {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}}
    p = _pod({"containers": [container], "overhead": {"cpu": "250m"}})
    assert p.requests == {"cpu": 1250, "nvidia.com/gpu": 2}


def test_containers_without_requests_score_with_kube_scheduler_defaults() -> None:
    p = _pod({"containers": [_c("a"), _c("b", cpu="2")]})
    assert p.requests == {"cpu": 2000}
    assert p.non_zero == {"cpu": 2100, "memory": 2 * 200 * 1024 * 1024}
