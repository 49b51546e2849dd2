"""Label and field selectors: parsing the query strings and matching objects, as kube-apiserver does.

Owns the grammar (``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``, ``a>1``, ``a<1``
for labels; ``f=v``, ``f==v``, ``f!=v`` for fields) and which fields each kind can be selected on. Pure:
no I/O, no store. A selector that does not parse raises ``StatusError`` 400 with the real message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .status import StatusError, bad_request

_KEY = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present or value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == "gt" else number < bound


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _label_error(text: str, why: str) -> StatusError:
    return bad_request(f"unable to parse requirement: {why}: {text!r}")


def _check_key(key: str, text: str) -> str:
    if not _KEY.match(key):
        raise _label_error(text, f"invalid label key {key!r}")
    return key


_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: str | None) -> list[Requirement]:
    """The requirements of a ``labelSelector`` query value (all must match); empty means everything."""
    if text is None or not text.strip():
        return []
    requirements = []
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise _label_error(text, "found '', expected: identifier")
        set_match = _SET.match(part)
        if set_match:
            key, op, inner = set_match.groups()
            values = tuple(v.strip() for v in inner.split(",") if v.strip())
            requirements.append(Requirement(_check_key(key, text), op, values))
            continue
        if part.startswith("!"):
            requirements.append(Requirement(_check_key(part[1:].strip(), text), "!"))
            continue
        for symbol, op in (("==", "="), ("!=", "!="), ("=", "="), (">", "gt"), ("<", "lt")):
            if symbol in part:
                key, _, value = part.partition(symbol)
                value = value.strip()
                if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", value):
                    raise _label_error(text, f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}")
                requirements.append(Requirement(_check_key(key.strip(), text), op, (value,)))
                break
        else:
            requirements.append(Requirement(_check_key(part, text), "exists"))
    return requirements


def labels_match(requirements: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


def selector_from_label_selector(selector: dict[str, Any] | None) -> list[Requirement] | None:
    """A ``metav1.LabelSelector`` object (matchLabels / matchExpressions) as requirements; None matches nothing."""
    if selector is None:
        return None
    requirements = [Requirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        requirements.append(
            Requirement(expression["key"], operators[expression["operator"]], tuple(expression.get("values") or ()))
        )
    return requirements


# --- fields -------------------------------------------------------------------------------------------------------


def _path(*keys: str) -> Callable[[dict[str, Any]], str]:
    def get(obj: dict[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            if not isinstance(value, dict):
                return ""
            value = value.get(key)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_COMMON = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}

#: Which fields each kind (by plural) can be selected on, as the real server registers them.
FIELDS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "pods": {
        **_COMMON,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "nodes": {
        **_COMMON,
        "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false",
    },
    "events": {
        **_COMMON,
        **{
            f"involvedObject.{f}": _path("involvedObject", f)
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "namespaces": {**_COMMON, "status.phase": _path("status", "phase")},
}


@dataclass(frozen=True)
class FieldRequirement:
    get: Callable[[dict[str, Any]], str]
    equal: bool
    value: str

    def matches(self, obj: dict[str, Any]) -> bool:
        return (self.get(obj) == self.value) == self.equal


def parse_field_selector(text: str | None, plural: str) -> list[FieldRequirement]:
    """The requirements of a ``fieldSelector`` for a kind; an unknown field is 400 as on the real server."""
    if text is None or not text.strip():
        return []
    supported = FIELDS.get(plural, _COMMON)
    requirements = []
    for raw in text.split(","):
        part = raw.strip()
        symbol = next((s for s in ("!=", "==", "=") if s in part), None)
        if symbol is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        key, _, value = part.partition(symbol)
        equal = symbol != "!="
        key = key.strip()
        if key not in supported:
            raise bad_request(f"field label not supported: {key}")
        requirements.append(FieldRequirement(supported[key], equal, value.strip()))
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    return all(r.matches(obj) for r in requirements)
