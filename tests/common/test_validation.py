"""The generic config walk: key paths, unknown and missing keys, strict types, hooks, dumps."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.common import validation
from kubegpu.common.validation import (
    Invalid,
    after,
    before,
    checked,
    model,
    nullable,
    strict_bool,
    strict_int,
    strict_str,
    tuple_of,
    validate,
)


def _even(value: int) -> int:
    if value % 2:
        raise ValueError(f"{value} is odd")
    return value


def _no_empty(data: Any) -> str | None:
    return "an item needs a key" if not data else None


def _upper(item: Item) -> Item:
    return replace(item, label=item.label.upper())


@dataclass(frozen=True, kw_only=True)
class Item:
    label: str = field(metadata=checked(strict_str))
    size: int = field(default=2, metadata=checked(after(strict_int, _even), "sizeInBytes"))


@dataclass(frozen=True, kw_only=True)
class Doc:
    enabled: bool | None = field(default=None, metadata=checked(nullable(strict_bool), "isEnabled"))
    items: tuple[Item, ...] = field(default=(), metadata=checked(tuple_of(model(Item, first=_no_empty, last=_upper))))
    count: int = field(default=0, metadata=checked(before(int)))
    child: Item | None = field(default=None, metadata=checked(nullable(model(Item))))


def problems(data: Any) -> list[str]:
    with pytest.raises(Invalid) as info:
        validate(Doc, data)
    return [str(issue) for issue in info.value.issues]


ERRORS = [
    ("unknown_key_names_its_path", {"items": [{"label": "a", "colour": 1}]}, ["items[0].colour: unknown key"]),
    ("missing_key", {"child": {"sizeInBytes": 4}}, ["child.label: required key is missing"]),
    ("yaml_true_is_not_an_int", {"child": {"label": "a", "sizeInBytes": True}},
     ["child.sizeInBytes: Input should be a valid integer"]),
    ("float_is_not_an_int", {"child": {"label": "a", "sizeInBytes": 2.0}},
     ["child.sizeInBytes: Input should be a valid integer"]),
    ("int_is_not_a_bool", {"isEnabled": 1}, ["isEnabled: Input should be a valid boolean"]),
    ("number_is_not_a_string", {"child": {"label": 5}}, ["child.label: Input should be a valid string"]),
    ("string_is_not_a_list", {"items": "abc"}, ["items: Input should be a valid tuple"]),
    ("scalar_is_not_a_mapping", {"child": 3}, ["child: Input should be a valid dictionary or instance of Item"]),
    ("rule_after_the_type", {"child": {"label": "a", "sizeInBytes": 3}}, ["child.sizeInBytes: 3 is odd"]),
    ("rule_before_the_type", {"count": "many"}, ["count: invalid literal for int() with base 10: 'many'"]),
    ("first_hook_is_the_only_problem_of_its_mapping", {"items": [{}]}, ["items[0]: an item needs a key"]),
    ("non_string_keys", {True: "a", 2.5: "b", None: "c"},
     ["[1]: Keys should be strings", "2.5: Keys should be strings", "None: Keys should be strings"]),
    ("name_and_key_both_given_the_name_is_unknown", {"isEnabled": True, "enabled": False}, ["enabled: unknown key"]),
    ("fields_first_then_unknown_keys_in_document_order",
     {"zz": 1, "isEnabled": "x", "items": [{"label": 1, "b": 2}], "aa": 3},
     ["isEnabled: Input should be a valid boolean", "items[0].label: Input should be a valid string",
      "items[0].b: unknown key", "zz: unknown key", "aa: unknown key"]),
]  # fmt: skip


@pytest.mark.parametrize(("data", "expected"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_every_problem_is_named_by_its_key_path(data: Any, expected: list[str]) -> None:
    assert problems(data) == expected


def test_top_level_that_is_not_a_mapping_has_no_path() -> None:
    assert problems(["a"]) == ["Input should be a valid dictionary or instance of Doc"]


def test_invalid_lists_every_problem_separated_by_semicolons() -> None:
    with pytest.raises(Invalid, match=r"^isEnabled: Input should be a valid boolean; x: unknown key$"):
        validate(Doc, {"isEnabled": 0, "x": 1})


def test_a_valid_document_is_built_with_defaults_hooks_and_tuples() -> None:
    doc = validate(Doc, {"enabled": True, "items": [{"label": "a"}, {"label": "b", "sizeInBytes": 8}], "count": "7"})
    assert doc == Doc(enabled=True, items=(Item(label="A"), Item(label="B", size=8)), count=7)


def test_null_is_accepted_only_where_nullable() -> None:
    assert validate(Doc, {"isEnabled": None, "child": None}) == Doc()
    assert problems({"child": {"label": None}}) == ["child.label: Input should be a valid string"]


def test_known_keys_are_document_keys_and_field_names() -> None:
    assert validation.known_keys(Item) == {"label", "size", "sizeInBytes"}
    assert validation.only_known_keys(Item, {"size": 2, "label": "a"})
    assert not validation.only_known_keys(Item, {"label": "a", "sise": 2})


def test_dump_uses_document_keys_lists_and_leaves_out_unset_fields() -> None:
    doc = Doc(items=(Item(label="a"),), child=Item(label="b", size=4))
    assert validation.dump(doc) == {
        "items": [{"label": "a", "sizeInBytes": 2}],
        "count": 0,
        "child": {"label": "b", "sizeInBytes": 4},
    }
    assert validation.dump(doc, exclude=("items", "count")) == {"child": {"label": "b", "sizeInBytes": 4}}


@given(
    st.builds(
        Doc,
        enabled=st.none() | st.booleans(),
        items=st.lists(
            st.builds(Item, label=st.text("ABC", min_size=1), size=st.integers(0, 9).map(lambda n: 2 * n))
        ).map(tuple),
        count=st.integers(),
        child=st.none() | st.builds(Item, label=st.text(max_size=3), size=st.just(4)),
    )
)
def test_a_dump_validates_back_to_the_same_instance(doc: Doc) -> None:
    assert validate(Doc, validation.dump(doc)) == doc


@pytest.mark.parametrize(
    ("loc", "path"),
    [((), ""), (("a",), "a"), (("a", 0, "b"), "a[0].b"), ((0, 1), "[0][1]")],
    ids=["root", "key", "key_index_key", "indices"],
)
def test_key_path_joins_keys_with_dots_and_indices_with_brackets(loc: tuple[int | str, ...], path: str) -> None:
    assert validation.key_path(loc) == path
