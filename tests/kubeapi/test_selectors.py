"""Selector grammar and matching, as tables (pure: no server)."""

from __future__ import annotations

import pytest

from tests.kubeapi.selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from tests.kubeapi.status import StatusError

OBJ = {
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "2"}},
    "spec": {"nodeName": "n1", "schedulerName": "gpu-scheduler"},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (x)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("tier>1", True),
        ("tier<2", False),
        ("app=web,tier=2", True),
        ("app=web,tier=3", False),
        ("app in (a, web) , tier", True),
        ("", True),
    ],
    ids=lambda v: str(v),
)
def test_label_selectors_match_as_kubernetes_does(selector: str, matches: bool) -> None:
    assert labels_match(parse_label_selector(selector), OBJ) is matches


@pytest.mark.parametrize("selector", ["app=web,", "a b c=d", "tier>x", "bad key=1"])
def test_malformed_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(StatusError) as caught:
        parse_label_selector(selector)
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("spec.nodeName=n1", True),
        ("spec.nodeName==n1", True),
        ("spec.nodeName!=n1", False),
        ("spec.nodeName=", False),
        ("status.phase=Running,spec.schedulerName=gpu-scheduler", True),
        ("metadata.name=p,metadata.namespace=ns", True),
        ("status.phase!=Running", False),
    ],
    ids=lambda v: str(v),
)
def test_pod_field_selectors_match(selector: str, matches: bool) -> None:
    assert fields_match(parse_field_selector(selector, "pods"), OBJ) is matches


def test_an_unset_field_matches_the_empty_value() -> None:
    unbound = {"metadata": {"name": "u"}, "spec": {}}
    assert fields_match(parse_field_selector("spec.nodeName=", "pods"), unbound)


def test_a_field_the_kind_does_not_register_is_400() -> None:
    with pytest.raises(StatusError) as caught:
        parse_field_selector("spec.nodeName=n1", "configmaps")
    assert caught.value.code == 400 and "field label not supported: spec.nodeName" in caught.value.message
