"""Pod metadata for series labels: dcgm-exporter's label-name sanitising and allowlist, and the UID."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.monitoring import podmeta

PROMETHEUS_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("app", "app"),
        ("app.kubernetes.io/name", "app_kubernetes_io_name"),
        ("team-name", "team_name"),
        ("example.com/cost-centre", "example_com_cost_centre"),
        ("Already_Fine9", "Already_Fine9"),
        ("1st", "_1st"),  # a Kubernetes key may start with a digit; a Prometheus name may not
    ],
    ids=["plain", "prefixed", "dash", "domain", "valid", "leading-digit"],
)
def test_a_label_key_becomes_a_prometheus_label_name(key: str, name: str) -> None:
    assert podmeta.sanitize_label_name(key) == name


@given(st.text(min_size=1, max_size=40))
def test_every_sanitised_key_is_a_valid_prometheus_label_name(key: str) -> None:
    assert PROMETHEUS_LABEL_NAME.fullmatch(podmeta.sanitize_label_name(key))


LABELS = {"app.kubernetes.io/name": "trainer", "team": "ml", "tier": "batch", "ci-run": "42"}


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ((), {"app_kubernetes_io_name", "team", "tier", "ci_run"}),
        (("^team$",), {"team"}),
        (("^t",), {"team", "tier"}),
        (("kubernetes",), {"app_kubernetes_io_name"}),  # unanchored, as Go's MatchString
        (("^app\\.kubernetes\\.io/", "^ci-"), {"app_kubernetes_io_name", "ci_run"}),  # the key as Kubernetes spells it
        (("^nothing$",), set()),
    ],
    ids=["no-allowlist", "exact", "prefix", "unanchored", "any-of-two-raw-keys", "none-match"],
)
def test_the_allowlist_keeps_the_labels_a_regex_matches(patterns: tuple[str, ...], expected: set[str]) -> None:
    selected = podmeta.select_labels(LABELS, podmeta.compile_allowlist(patterns))
    assert {name for name, _ in selected} == expected
    assert list(selected) == sorted(selected)


def test_two_keys_that_sanitise_alike_keep_the_first_in_key_order() -> None:
    assert podmeta.select_labels({"a.b": "dot", "a-b": "dash"}) == (("a_b", "dash"),)


def test_from_pod_reads_namespace_name_uid_and_labels() -> None:
    pod = {"metadata": {"namespace": "ml", "name": "train", "uid": "u-1", "labels": {"app": "x"}}}
    assert podmeta.from_pod(pod) == ("ml", "train", podmeta.PodMeta(uid="u-1", labels=(("app", "x"),)))
    assert podmeta.from_pod({"metadata": {"name": "bare"}}) == ("", "bare", podmeta.PodMeta(uid=""))
