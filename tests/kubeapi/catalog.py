"""The kinds the server serves: built-in core/v1, scheduling, policy, coordination and apiextensions kinds, and
the custom resources that CustomResourceDefinitions add while they exist.

Owns each kind's group, versions, plural, kind name, scope and subresources, and turning a CRD object into a
kind. It must not hold objects (that is the store) or answer requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]  # served versions, preferred first
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    custom: bool = False
    #: openAPIV3Schema per version (custom resources only): unknown fields are pruned with it.
    schemas: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.group}/{self.plural}"

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _builtin(
    group: str, version: str, plural: str, kind: str, namespaced: bool, *subs: str, short: tuple[str, ...] = ()
) -> ResourceType:
    return ResourceType(group, (version,), plural, kind.lower(), kind, namespaced, frozenset(subs), short)


BUILTIN: tuple[ResourceType, ...] = (
    _builtin("", "v1", "namespaces", "Namespace", False, "status", short=("ns",)),
    _builtin("", "v1", "pods", "Pod", True, "status", "binding", "eviction", short=("po",)),
    _builtin("", "v1", "nodes", "Node", False, "status", short=("no",)),
    _builtin("", "v1", "events", "Event", True, short=("ev",)),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", True, short=("sa",)),
    _builtin("", "v1", "configmaps", "ConfigMap", True, short=("cm",)),
    _builtin("events.k8s.io", "v1", "events", "Event", True, short=("ev",)),
    _builtin("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    _builtin("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "status", short=("pdb",)),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease", True),
    _builtin("apps", "v1", "daemonsets", "DaemonSet", True, "status", short=("ds",)),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        "status",
        short=("crd", "crds"),
    ),
)


class CatalogError(ValueError):
    """A CRD that cannot be served; the message names the field."""


def from_crd(crd: dict[str, Any]) -> ResourceType:
    """The kind a CRD defines (served versions, storage version first among equals)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not group:
        raise CatalogError("spec.group: Required value")
    if not plural:
        raise CatalogError("spec.names.plural: Required value")
    if not kind:
        raise CatalogError("spec.names.kind: Required value")
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        raise CatalogError(f'spec.scope: Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"')
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not versions:
        raise CatalogError("spec.versions: Invalid value: must have exactly one version marked as storage version")
    subresources = frozenset()
    schemas = {}
    for version in versions:
        if "status" in (version.get("subresources") or {}):
            subresources = frozenset({"status"})
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            schemas[version["name"]] = schema
    return ResourceType(
        group=group,
        versions=tuple(v["name"] for v in versions),
        plural=plural,
        singular=names.get("singular") or kind.lower(),
        kind=kind,
        namespaced=scope == "Namespaced",
        subresources=subresources,
        short_names=tuple(names.get("shortNames") or ()),
        custom=True,
        schemas=schemas,
    )


class Catalog:
    """Kinds by (group, version, plural) as requests name them."""

    def __init__(self) -> None:
        self._by_key: dict[str, ResourceType] = {}
        for rtype in BUILTIN:
            self._by_key[rtype.key] = rtype

    def add(self, rtype: ResourceType) -> None:
        self._by_key[rtype.key] = rtype

    def remove(self, key: str) -> None:
        self._by_key.pop(key, None)

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        rtype = self._by_key.get(f"{group}/{plural}")
        if rtype is None or version not in rtype.versions:
            return None
        return rtype

    def by_key(self, key: str) -> ResourceType:
        return self._by_key[key]

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per API group (the core group is ``""``), preferred first."""
        groups: dict[str, list[str]] = {}
        for rtype in self._by_key.values():
            versions = groups.setdefault(rtype.group, [])
            for version in rtype.versions:
                if version not in versions:
                    versions.append(version)
        return groups


def prune(value: Any, schema: dict[str, Any] | None) -> Any:
    """Drop fields a structural schema does not declare (unless it preserves unknown fields), as the real server
    does for custom resources. Types are not validated here."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is None and additional is None:
            return value if schema.get("type") != "object" else {}
        result = {}
        for key, item in value.items():
            if properties is not None and key in properties:
                result[key] = prune(item, properties[key])
            elif isinstance(additional, dict):
                result[key] = prune(item, additional)
            elif additional is True:
                result[key] = item
        return result
    if isinstance(value, list):
        return [prune(item, schema.get("items")) for item in value]
    return value


def prune_custom_resource(obj: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """Prune a custom resource's body; apiVersion, kind and metadata are always kept whole."""
    if schema is None:
        return obj
    kept = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    body = prune({k: v for k, v in obj.items() if k not in kept}, schema)
    return {**kept, **body}
