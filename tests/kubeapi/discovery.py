"""Discovery documents: ``/version``, ``/api``, ``/apis``, ``/api/v1`` and ``/apis/<group>/<version>``, built from
the catalog so that clients (lightkube's generic resources, kubectl, Helm) find every kind, CRDs included.

Owns their shapes (APIVersions, APIGroupList, APIResourceList) and nothing else; pure over the catalog.
"""

from __future__ import annotations

from typing import Any

from .catalog import VERBS, Catalog

VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-kubegpu-test",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_groups(catalog: Catalog) -> dict[str, Any]:
    groups = []
    for group, versions in sorted(catalog.group_versions().items()):
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog: Catalog, group: str) -> dict[str, Any] | None:
    versions = catalog.group_versions().get(group)
    if not versions or not group:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries, "preferredVersion": entries[0]}


def resource_list(catalog: Catalog, group: str, version: str) -> dict[str, Any] | None:
    resources: list[dict[str, Any]] = []
    for rtype in sorted(catalog.all(), key=lambda r: r.plural):
        if rtype.group != group or version not in rtype.versions:
            continue
        entry: dict[str, Any] = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": VERBS,
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        resources.append(entry)
        for sub in sorted(rtype.subresources):
            if sub == "status":
                resources.append(
                    {
                        "name": f"{rtype.plural}/status",
                        "singularName": "",
                        "namespaced": rtype.namespaced,
                        "kind": rtype.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            elif sub == "binding":
                resources.append(
                    {
                        "name": f"{rtype.plural}/binding",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Binding",
                        "verbs": ["create"],
                    }
                )
            elif sub == "eviction":
                resources.append(
                    {
                        "name": f"{rtype.plural}/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
    if not resources:
        return None
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
