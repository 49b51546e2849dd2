"""CustomResourceDefinitions and the custom resources they define, with PodGroup as the scheduler uses it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import PatchType

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler

GROUP, VERSION = "scheduling.x-k8s.io", "v1alpha1"
PodGroup = create_namespaced_resource(GROUP, VERSION, "PodGroup", "podgroups")

#: A PodGroup CRD shaped like scheduler-plugins' (the project's own lives in deploy/helm/kubegpu/files/crds/).
PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"podgroups.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "podgroups",
            "singular": "podgroup",
            "kind": "PodGroup",
            "listKind": "PodGroupList",
            "shortNames": ["pg", "pgs"],
        },
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "minMember": {"type": "integer", "format": "int32"},
                                    "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
                                    "minResources": {
                                        "type": "object",
                                        "additionalProperties": {
                                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                                            "x-kubernetes-int-or-string": True,
                                        },
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "running": {"type": "integer"},
                                    "succeeded": {"type": "integer"},
                                    "failed": {"type": "integer"},
                                    "scheduleStartTime": {"type": "string", "format": "date-time"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def _group(name: str, min_member: int, **spec: Any) -> Any:
    return PodGroup.from_dict(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member, **spec},
        }
    )


def test_a_crd_becomes_established_and_discoverable(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    crd = kube.client().get(CustomResourceDefinition, f"podgroups.{GROUP}")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    resources = {r["name"] for r in kube.http().get(f"/apis/{GROUP}/{VERSION}").json()["resources"]}
    assert {"podgroups", "podgroups/status"} <= resources
    groups = {g["name"] for g in kube.http().get("/apis").json()["groups"]}
    assert GROUP in groups


def test_pod_groups_are_created_listed_and_patched(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    client = kube.client()
    client.create(_group("gang", 4, scheduleTimeoutSeconds=30))
    got = client.get(PodGroup, "gang")
    assert got.spec["minMember"] == 4 and got.spec["scheduleTimeoutSeconds"] == 30
    assert [g.metadata.name for g in client.list(PodGroup)] == ["gang"]
    patched = client.patch(PodGroup, "gang", {"spec": {"minMember": 3}}, patch_type=PatchType.MERGE)
    assert patched.spec["minMember"] == 3


def test_the_status_subresource_of_a_custom_resource_changes_only_status(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    client = kube.client()
    client.create(_group("st", 2))
    answer = kube.http().patch(
        f"/apis/{GROUP}/{VERSION}/namespaces/{kube.namespace}/podgroups/st/status",
        json={"spec": {"minMember": 9}, "status": {"phase": "Scheduling"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200
    got = client.get(PodGroup, "st")
    assert got.status["phase"] == "Scheduling" and got.spec["minMember"] == 2
    main = client.patch(PodGroup, "st", {"status": {"phase": "Running"}}, patch_type=PatchType.MERGE)
    assert main.status["phase"] == "Scheduling"


def test_unknown_fields_are_pruned(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    created = kube.client().create(_group("pruned", 1, bogus="x"))
    assert "bogus" not in created.spec


def test_strategic_merge_patch_on_a_custom_resource_is_415(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    client = kube.client()
    client.create(_group("smp", 1))
    with pytest.raises(ApiError) as caught:
        client.patch(PodGroup, "smp", {"spec": {"minMember": 2}}, patch_type=PatchType.STRATEGIC)
    assert caught.value.status.code == 415


async def test_pod_groups_can_be_watched(kube: KubeEnv) -> None:
    kube.ensure_crd(PODGROUP_CRD)
    client = kube.async_client()
    listing = client.list(PodGroup)
    _ = [g async for g in listing]
    await client.create(_group("watched", 2))
    seen: list[tuple[str, str]] = []

    async def run() -> None:
        async for event_type, obj in client.watch(PodGroup, resource_version=listing.resourceVersion):
            seen.append((event_type, obj.metadata.name))
            return

    await asyncio.wait_for(run(), 10)
    assert seen == [("ADDED", "watched")]
    await client.close()


def test_deleting_a_crd_removes_its_resources_and_kind(kube: KubeEnv) -> None:
    kube.require_server()  # the real one finalizes CRD deletion asynchronously, and the CRD may be shared
    client = kube.client()
    crd = {
        **PODGROUP_CRD,
        "metadata": {"name": f"tempgroups.{GROUP}"},
        "spec": {**PODGROUP_CRD["spec"], "names": {"plural": "tempgroups", "kind": "TempGroup"}},
    }
    client.create(CustomResourceDefinition.from_dict(crd))
    TempGroup = create_namespaced_resource(GROUP, VERSION, "TempGroup", "tempgroups")
    client.create(TempGroup.from_dict({"metadata": {"name": "t"}, "spec": {"minMember": 1}}))
    client.delete(CustomResourceDefinition, f"tempgroups.{GROUP}")
    answer = kube.http().get(f"/apis/{GROUP}/{VERSION}/namespaces/{kube.namespace}/tempgroups")
    assert answer.status_code == 404


def test_a_crd_whose_name_is_not_plural_dot_group_is_422(kube: KubeEnv) -> None:
    crd = {**PODGROUP_CRD, "metadata": {"name": f"wrong.{GROUP}"}}
    with pytest.raises(ApiError) as caught:
        kube.client().create(CustomResourceDefinition.from_dict(crd))
    assert caught.value.status.code == 422


def test_a_dry_run_crd_serves_nothing(kube: KubeEnv) -> None:
    crd = {
        **PODGROUP_CRD,
        "metadata": {"name": f"drygroups.{GROUP}"},
        "spec": {**PODGROUP_CRD["spec"], "names": {"plural": "drygroups", "kind": "DryGroup"}},
    }
    answer = kube.http().post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", params={"dryRun": "All"}, json=crd
    )
    assert answer.status_code == 201
    assert kube.http().get(f"/apis/{GROUP}/{VERSION}/namespaces/{kube.namespace}/drygroups").status_code == 404
