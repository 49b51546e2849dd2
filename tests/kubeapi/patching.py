"""The three patch formats a client sends with PATCH: JSON merge patch, strategic merge patch, JSON patch.

Owns applying a patch document to an object (plain dicts). Strategic merge knows the merge keys of the
lists our clients patch (conditions by ``type``, containers/env/volumes by ``name``, ...); every other
list is replaced, as the real server does for lists without a patch strategy (``spec.taints``,
``spec.tolerations``). Pure: no I/O. A patch that cannot apply raises ``StatusError``.
"""

from __future__ import annotations

import copy
from typing import Any

from .codec import clone
from .status import StatusError, bad_request, unsupported_media_type

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

#: List fields with patchStrategy "merge" in the core types, by field name, and their merge key.
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
}

#: Lists of scalars with patchStrategy "merge": patched lists are unions.
MERGED_SCALAR_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch over the core types' merge keys, with the ``$patch`` and ``$deleteFromPrimitiveList``
    directives; ``$setElementOrder`` and ``$retainKeys`` are accepted and ignored (order is kept as merged)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.partition("/")[2]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if field in MERGED_SCALAR_LISTS:
        merged = list(current or [])
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
            return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
        return copy.deepcopy(patch)
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if i.get("$patch") != "replace"]
    merged = [copy.deepcopy(item) for item in (current or [])]
    for item in patch:
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next((i for i, existing in enumerate(merged) if existing.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"the server rejected our request due to an error in our request: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _fail(message: str) -> StatusError:
    return StatusError(422, "Invalid", message)


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _fail(f"doc is missing path: {path!r}")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _fail(f"doc is missing path: {path!r}")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _fail(f"unable to remove nonexistent key: {last}: missing value")


def _add(doc: Any, path: str, value: Any, replace: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _fail(f"replace operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise _fail(f"add operation does not apply: doc is missing path: {path!r}: missing value")
    else:
        raise _fail(f"doc is missing path: {path!r}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test) on a copy of ``target``."""
    if not isinstance(operations, list):
        raise bad_request("the server rejected our request due to an error in our request: a JSON patch is a list")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"the server rejected our request due to an error in our request: bad operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, op.get("value"), replace=False)
        elif kind == "replace":
            doc = _add(doc, path, op.get("value"), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value, replace=False)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])), replace=False)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _fail(f"testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


def apply_patch(content_type: str, target: dict[str, Any], patch: Any, strategic_allowed: bool) -> dict[str, Any]:
    """Apply a PATCH body by its Content-Type; custom resources (``strategic_allowed`` False) refuse strategic."""
    media = content_type.split(";")[0].strip()
    if media == MERGE:
        result = merge_patch(target, patch)
    elif media == STRATEGIC:
        if not strategic_allowed:
            raise unsupported_media_type(media)
        result = strategic_merge_patch(target, patch)
    elif media == JSON_PATCH:
        result = json_patch(target, patch)
    else:
        raise unsupported_media_type(media)
    if not isinstance(result, dict):
        raise bad_request("the patch did not produce an object")
    return result
