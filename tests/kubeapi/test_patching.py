"""Patch formats as tables (pure: no server)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubeapi.patching import json_patch, merge_patch, strategic_merge_patch
from tests.kubeapi.status import StatusError


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": None}}, {"a": {"x": 1}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        (
            {"conditions": [{"type": "A", "status": "F"}]},
            {"conditions": [{"type": "A", "status": "T"}]},
            {"conditions": [{"type": "A", "status": "T"}]},
        ),
        (
            {"conditions": [{"type": "A", "status": "F"}]},
            {"conditions": [{"type": "B", "status": "T"}]},
            {"conditions": [{"type": "A", "status": "F"}, {"type": "B", "status": "T"}]},
        ),
        ({"taints": [{"key": "a"}]}, {"taints": [{"key": "b"}]}, {"taints": [{"key": "b"}]}),
        ({"finalizers": ["a"]}, {"finalizers": ["b"]}, {"finalizers": ["a", "b"]}),
        ({"finalizers": ["a", "b"]}, {"$deleteFromPrimitiveList/finalizers": ["a"]}, {"finalizers": ["b"]}),
        (
            {"containers": [{"name": "c", "image": "1", "env": [{"name": "X", "value": "1"}]}]},
            {"containers": [{"name": "c", "env": [{"name": "Y", "value": "2"}]}]},
            {
                "containers": [
                    {"name": "c", "image": "1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
                ]
            },
        ),
        (
            {"conditions": [{"type": "A"}, {"type": "B"}]},
            {"conditions": [{"type": "A", "$patch": "delete"}]},
            {"conditions": [{"type": "B"}]},
        ),
        (
            {"conditions": [{"type": "A"}]},
            {"conditions": [{"$patch": "replace"}, {"type": "C"}]},
            {"conditions": [{"type": "C"}]},
        ),
        ({"spec": {"a": 1, "b": 2}}, {"spec": {"$patch": "replace", "c": 3}}, {"spec": {"c": 3}}),
        ({"labels": {"a": "1"}}, {"labels": {"a": None}}, {"labels": {}}),
    ],
)
def test_strategic_merge_patch_uses_merge_keys(target: Any, patch: Any, expected: Any) -> None:
    assert strategic_merge_patch(target, patch) == expected


def test_json_patch_applies_all_six_operations() -> None:
    doc = {"a": {"b": 1}, "list": [1, 2]}
    result = json_patch(
        doc,
        [
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "copy", "from": "/a/b", "path": "/c"},
            {"op": "move", "from": "/c", "path": "/d"},
            {"op": "replace", "path": "/a/b", "value": 5},
            {"op": "remove", "path": "/list/1"},
            {"op": "test", "path": "/d", "value": 1},
            {"op": "add", "path": "/x~1y", "value": "slash"},
        ],
    )
    assert result == {"a": {"b": 5}, "list": [0, 2, 3], "d": 1, "x/y": "slash"}
    assert doc == {"a": {"b": 1}, "list": [1, 2]}


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "test", "path": "/a", "value": 2},
    ],
)
def test_json_patch_operations_that_cannot_apply_are_422(operation: dict[str, Any]) -> None:
    with pytest.raises(StatusError) as caught:
        json_patch({"a": 1}, [operation])
    assert caught.value.code == 422
