"""Pod manifests: what is read, what is rejected with which field named, and the stored form."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kubegpu.kubelet import errors, pod


def manifest(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


def gpu(n: object, name: str = "c", **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": {"nvidia.com/gpu": n, "cpu": "500m"}}, **extra}


def test_limits_of_extended_resources_are_read_in_manifest_order_and_native_ones_ignored() -> None:
    c = {"name": "c", "resources": {"limits": {"example.com/b": 1, "cpu": 2, "example.com/a": "3", "memory": "1Gi"}}}
    p = pod.parse(manifest([c]))
    assert p.containers[0].limits == (("example.com/b", 1), ("example.com/a", 3))


def test_namespace_defaults_to_default_and_uid_is_taken_from_metadata() -> None:
    p = pod.parse(manifest([gpu(1)], uid="u-1"))
    assert (p.namespace, p.name, p.uid) == ("default", "p", "u-1")
    assert pod.parse(manifest([gpu(1)])).uid == ""


def test_init_containers_come_first_and_restart_policy_always_makes_a_sidecar() -> None:
    p = pod.parse(manifest([gpu(1, "app")], init=[gpu(1, "setup"), gpu(1, "side", restartPolicy="Always")]))
    assert [(c.name, c.init, c.restartable) for c in p.all_containers()] == [
        ("setup", True, False),
        ("side", True, True),
        ("app", False, False),
    ]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([1, 2], "manifest: must be a mapping, got list"),
        ({"apiVersion": "v1", "kind": "Service"}, "kind: must be Pod, got 'Service'"),
        ({**manifest([gpu(1)]), "apiVersion": "v2"}, "apiVersion: must be v1"),
        ({**manifest([gpu(1)]), "metadata": {}}, "metadata.name: Required value"),
        ({**manifest([gpu(1)]), "spec": {"containers": []}}, "spec.containers: Required value"),
        (manifest([{"resources": {}}]), "spec.containers[0].name: Required value"),
        (
            manifest([gpu("1.5")]),
            'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1.5": must be an integer',
        ),
        (manifest([gpu("500m")]), "must be an integer"),
        (manifest([gpu(-1)]), "must be greater than or equal to 0"),
        (manifest([gpu("two")]), "spec.containers[0].resources.limits[nvidia.com/gpu]: 'two' is not a quantity"),
        (manifest([gpu(True)]), "quantities must be a number or a string, got bool"),
        (manifest([gpu(1), gpu(1)]), 'spec.containers[1].name: Duplicate value: "c"'),
        (manifest([gpu(1, "x")], init=[gpu(1, "x")]), 'spec.containers[0].name: Duplicate value: "x"'),
        (manifest([gpu(1, restartPolicy="Always")]), "may not be set for non-init containers"),
        (manifest([gpu(1)], init=[gpu(1, "i", restartPolicy="OnFailure")]), 'Unsupported value: "OnFailure"'),
        (
            manifest(
                [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 2}}}]
            ),
            'requests[nvidia.com/gpu]: Invalid value: "2": must be equal to nvidia.com/gpu limit of 1',
        ),
        (
            manifest([{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 2}}}]),
            "Limit must be set for non overcommitable resources",
        ),
        (manifest([{"name": "c", "resources": {"limits": ["nvidia.com/gpu"]}}]), "resources.limits: must be a mapping"),
    ],
    ids=[
        "not-a-mapping",
        "not-a-pod",
        "wrong-api-version",
        "no-name",
        "no-containers",
        "container-without-name",
        "fractional-quantity",
        "milli-quantity",
        "negative-quantity",
        "not-a-quantity",
        "boolean-quantity",
        "duplicate-container",
        "init-and-app-share-a-name",
        "restart-policy-on-app-container",
        "init-restart-policy-not-always",
        "requests-differ-from-limits",
        "requests-without-limits",
        "limits-not-a-mapping",
    ],
)
def test_invalid_manifests_are_rejected_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(errors.PodManifestError, match=None) as exc:
        pod.parse(doc)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (2, Fraction(2)),
        ("2", Fraction(2)),
        ("1k", Fraction(1000)),
        ("1Ki", Fraction(1024)),
        ("500m", Fraction(1, 2)),
        ("2.0", Fraction(2)),
        (2.0, Fraction(2)),
        ("1e3", Fraction(1000)),
        ("+3", Fraction(3)),
    ],
    ids=["int", "string", "kilo", "kibi", "milli", "decimal", "float", "exponent", "plus-sign"],
)
def test_quantities_parse_like_kubernetes(text: object, value: Fraction) -> None:
    assert pod.parse_quantity(text) == value


def test_requests_equal_to_limits_and_integral_decimals_are_accepted() -> None:
    c = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2.0"}, "requests": {"nvidia.com/gpu": 2}}}
    assert pod.parse(manifest([c])).containers[0].limits == (("nvidia.com/gpu", 2),)


def test_the_stored_manifest_parses_back_to_the_same_pod() -> None:
    p = pod.parse(
        manifest([gpu(2, "app")], init=[gpu(1, "i"), gpu(1, "s", restartPolicy="Always")], uid="u", namespace="ml")
    )
    assert pod.parse(p.to_manifest()) == p
