"""Checking decoded YAML/JSON mappings against frozen dataclasses, every problem named by its key path.

Owns the one validation mechanism of the project — behind the device plugin's
config file and resolved config, the CDI spec model and the machine profiles: a
dataclass declares each field's document key and check with :func:`checked`;
:func:`validate` walks a mapping against it, collects one :class:`Issue` per
problem (unknown key, missing key, wrong type, a broken rule; all of them, not
only the first) and builds the instance only when there is none; :func:`dump`
turns an instance back into that mapping; :func:`partial` checks a mapping with
every key optional and keeps it as a mapping. Also the strict type checks with their
texts (the ones the config's pydantic models used to print, kept so messages do
not change).

Knows no NVIDIA key or rule (:mod:`kubegpu.deviceplugin.config.v1` has them).
Home-made rather than pydantic on purpose: pydantic cost the plugin about 10 MiB
of RSS against its memory target. Pure: no files, no environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    T = TypeVar("T", bound=DataclassInstance)
else:
    T = TypeVar("T")

#: Where a problem is: keys and list indices from the document's root.
Loc = tuple[int | str, ...]

UNKNOWN_KEY = "unknown key"
MISSING_KEY = "required key is missing"


@dataclasses.dataclass(frozen=True)
class Issue:
    """One problem in a document: where it is and the rule it breaks."""

    loc: Loc
    rule: str

    def __str__(self) -> str:
        path = key_path(self.loc)
        return f"{path}: {self.rule}" if path else self.rule


class Invalid(ValueError):
    """A document that breaks its schema. ``issues`` holds every problem; ``str()`` joins them with ``; ``."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = tuple(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


#: A field check: gets the raw value, its location and the issue list; returns the field's value.
#: A check reports problems by appending to the list (so one walk finds them all), never by raising.
Check = Callable[[Any, Loc, list[Issue]], Any]
#: Runs on a model's raw mapping before its fields; returns the problem's text or None.
Before = Callable[[Mapping[Any, Any]], str | None]


def key_path(loc: Sequence[int | str]) -> str:
    """``('sharing', 'timeSlicing', 'resources', 0, 'replicas')`` -> ``sharing.timeSlicing.resources[0].replicas``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


# --- declaring fields -----------------------------------------------------------------------

_SPEC = "kubegpu.validation"


@dataclasses.dataclass(frozen=True)
class _Spec:
    check: Check
    key: str | None


def checked(check: Check, key: str | None = None) -> dict[str, Any]:
    """Field metadata: ``check`` validates the field and ``key`` is its document key (default: the field's name).

    The field's name is accepted in the document too (``mig_strategy`` for ``migStrategy``); when both are
    there the key wins and the name is an unknown key. A field without a default is required.
    """
    return {_SPEC: _Spec(check, key)}


def _key(field: dataclasses.Field[Any]) -> str:
    declared: _Spec | None = field.metadata.get(_SPEC)
    return declared.key if declared is not None and declared.key else field.name


def document_key(field: dataclasses.Field[Any]) -> str | None:
    """The document key of a field declared with :func:`checked`, None for a field that is not in documents."""
    return _key(field) if _SPEC in field.metadata else None


def known_keys(cls: type[DataclassInstance]) -> frozenset[str]:
    """Every key a document may use for ``cls``: document keys and field names."""
    fields = dataclasses.fields(cls)
    return frozenset(_key(f) for f in fields) | {f.name for f in fields}


def only_known_keys(cls: type[DataclassInstance], data: Mapping[Any, Any]) -> bool:
    """True when every key of ``data`` is one of ``cls``'s (see :func:`known_keys`)."""
    known = known_keys(cls)
    return all(key in known for key in data)


# --- checks ---------------------------------------------------------------------------------


def _strict(accepts: Callable[[Any], bool], what: str) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not accepts(value):
            issues.append(Issue(loc, f"Input should be a valid {what}"))
        return value

    return check


#: Strict types, as Go's decoder has them: no coercion, so a YAML ``true`` is no int and ``"4"`` no int either.
strict_str = _strict(lambda v: isinstance(v, str), "string")
strict_bool = _strict(lambda v: isinstance(v, bool), "boolean")
strict_int = _strict(lambda v: isinstance(v, int) and not isinstance(v, bool), "integer")


def nullable(check: Check) -> Check:
    """``None`` (the key given as ``null``) or what ``check`` accepts."""

    def nullable_check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        return None if value is None else check(value, loc, issues)

    return nullable_check


def tuple_of(item: Check) -> Check:
    """A list (or set) whose every item passes ``item``; the field's value is a tuple."""

    def tuple_check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, (list, tuple, set, frozenset)):
            issues.append(Issue(loc, "Input should be a valid tuple"))
            return value
        return tuple(item(v, (*loc, i), issues) for i, v in enumerate(value))

    return tuple_check


def before(convert: Callable[[Any], Any], then: Check | None = None) -> Check:
    """``convert`` the raw value (a ``ValueError``'s text is the broken rule), then ``then`` checks the result."""

    def before_check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        try:
            out = convert(value)
        except ValueError as exc:
            issues.append(Issue(loc, str(exc)))
            return value
        return out if then is None else then(out, loc, issues)

    return before_check


def after(check: Check, convert: Callable[[Any], Any]) -> Check:
    """``check``, then, only if it passed, ``convert`` the value (a ``ValueError``'s text is the broken rule)."""

    def after_check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        seen = len(issues)
        out = check(value, loc, issues)
        if len(issues) > seen:
            return out
        try:
            return convert(out)
        except ValueError as exc:
            issues.append(Issue(loc, str(exc)))
            return out

    return after_check


@dataclasses.dataclass(frozen=True)
class _Model:
    """The check of a nested model; it knows its class so :func:`partial` can walk into it."""

    cls: type[Any]
    first: Before | None
    last: Callable[[Any], Any] | None

    def __call__(self, value: Any, loc: Loc, issues: list[Issue]) -> Any:
        return _build(self.cls, value, loc, issues, self.first, self.last)


def model(cls: type[T], *, first: Before | None = None, last: Callable[[T], T] | None = None) -> Check:
    """A nested mapping checked against ``cls``.

    ``first`` looks at the raw mapping before the fields (a problem there is the only one reported for
    it); ``last`` gets the built instance and may return a changed copy or raise ``ValueError``.
    """
    return _Model(cls, first, last)


def partial(cls: type[DataclassInstance]) -> Check:
    """A mapping checked against ``cls`` with every key optional (nested models too): the value is the
    checked mapping under document keys, not an instance, so a caller can overlay it and build later.

    A key given as ``null`` counts as not given. Unknown keys and bad values are problems as in :func:`model`.
    """

    def partial_check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        return _partial(cls, value, loc, issues)

    return partial_check


def _partial(cls: type[DataclassInstance], data: Any, loc: Loc, issues: list[Issue]) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        issues.append(Issue(loc, f"Input should be a valid dictionary or instance of {cls.__name__}"))
        return {}
    out: dict[str, Any] = {}
    used: set[str] = set()
    for field in dataclasses.fields(cls):
        declared: _Spec | None = field.metadata.get(_SPEC)
        if declared is None:
            continue
        wanted = _key(field)
        given = wanted if wanted in data else field.name if field.name in data else None
        if given is None:
            continue
        used.add(given)
        if data[given] is None:
            continue
        if isinstance(declared.check, _Model):
            out[wanted] = _partial(declared.check.cls, data[given], (*loc, given), issues)
        else:
            out[wanted] = declared.check(data[given], (*loc, given), issues)
    _unknown_keys(data, used, loc, issues)
    return out


def _unknown_keys(data: Mapping[Any, Any], used: set[str], loc: Loc, issues: list[Issue]) -> None:
    for key in data:
        if not isinstance(key, str):
            # YAML allows any scalar as a key (``yes:`` is True, ``1:`` is 1).
            issues.append(Issue((*loc, int(key) if isinstance(key, int) else str(key)), "Keys should be strings"))
        elif key not in used:
            issues.append(Issue((*loc, key), UNKNOWN_KEY))


def validate(cls: type[T], data: Any, *, first: Before | None = None, last: Callable[[T], T] | None = None) -> T:
    """``data`` checked against ``cls`` (see :func:`model`) and built; raises :class:`Invalid` naming every problem."""
    issues: list[Issue] = []
    built = _build(cls, data, (), issues, first, last)
    if issues or built is None:
        raise Invalid(issues)
    return built


def _build(
    cls: type[T], data: Any, loc: Loc, issues: list[Issue], first: Before | None, last: Callable[[T], T] | None
) -> T | None:
    if not isinstance(data, Mapping):
        issues.append(Issue(loc, f"Input should be a valid dictionary or instance of {cls.__name__}"))
        return None
    if first is not None:
        problem = first(data)
        if problem:
            issues.append(Issue(loc, problem))
            return None
    seen = len(issues)
    values: dict[str, Any] = {}
    used: set[str] = set()
    # Fields in declaration order, then the keys no field took, in document order.
    for field in dataclasses.fields(cls):
        declared: _Spec | None = field.metadata.get(_SPEC)
        if declared is None:
            continue
        wanted = _key(field)
        given = wanted if wanted in data else field.name if field.name in data else None
        if given is None:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                issues.append(Issue((*loc, wanted), MISSING_KEY))
            continue
        used.add(given)
        values[field.name] = declared.check(data[given], (*loc, given), issues)
    _unknown_keys(data, used, loc, issues)
    if len(issues) > seen:
        return None
    built = cls(**values)
    if last is not None:
        try:
            built = last(built)
        except ValueError as exc:
            issues.append(Issue(loc, str(exc)))
            return None
    return built


# --- dumping --------------------------------------------------------------------------------


def dump(obj: DataclassInstance, exclude: Collection[str] = ()) -> dict[str, Any]:
    """``obj`` as its document: document keys, tuples as lists, ``None`` (unset) fields left out.

    Keys come in field order, so the JSON of a dump is stable; ``exclude`` names fields to leave out.
    """
    out: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if field.name in exclude or value is None:
            continue
        out[_key(field)] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dump(value)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value
