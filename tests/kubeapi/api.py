"""The API's verbs over the store: create, get, list, update, patch, delete, deletecollection, and the
``binding`` / ``eviction`` / ``status`` subresources, with the control plane's side effects that tests rely on
(namespace lifecycle, node taints, PDB status, CRDs becoming served kinds, graceful pod deletion).

Owns request semantics once a request is parsed: optimistic concurrency, preconditions, what a status
update may change, what each delete does. It answers with ``Reply`` or raises ``StatusError``; it must not
know HTTP framing (server.py) or stream watches (watching.py). Runs on the server's loop only.
"""

from __future__ import annotations

import datetime as dt
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import yaml

from . import admission, disruption, eventviews
from .catalog import Catalog, CatalogError, ResourceType, from_crd, prune_custom_resource
from .codec import clone, decode, encode
from .patching import APPLY, apply_patch, merge_patch, strategic_merge_patch
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .status import (
    STALE_OBJECT,
    StatusError,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    internal_error,
    invalid,
    method_not_allowed,
    not_found,
    success_body,
    too_many_requests,
)
from .store import Obj, Store

ROOT_CA = "kube-root-ca.crt"
_NO_CA = "-----BEGIN CERTIFICATE-----\n(in-process test server: no TLS)\n-----END CERTIFICATE-----\n"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
PODS, NODES, NAMESPACES, LEASES = "/pods", "/nodes", "/namespaces", "coordination.k8s.io/leases"
PDBS, PRIORITY_CLASSES, CRDS = (
    "policy/poddisruptionbudgets",
    "scheduling.k8s.io/priorityclasses",
    ("apiextensions.k8s.io/customresourcedefinitions"),
)


def now(offset_s: float = 0) -> str:
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Target:
    """What a request addresses: kind and version, namespace (None: cluster-scoped or all), name, subresource."""

    rtype: ResourceType
    version: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None


@dataclass(frozen=True)
class Reply:
    code: int
    body: bytes


def reply(code: int, obj: Obj) -> Reply:
    return Reply(code, encode(obj))


class Api:
    def __init__(self, store: Store | None = None) -> None:
        self.store = store or Store()
        self.catalog = Catalog()
        #: when each node's kubelet last showed life (a status write or a renewal of its kube-node-lease Lease)
        self.heartbeats: dict[str, float] = {}
        self._bootstrap()

    # --- bootstrap ---------------------------------------------------------------------------------------------

    def _bootstrap(self) -> None:
        for name in SYSTEM_NAMESPACES:
            self._create_namespace_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for name, value, description in admission.SYSTEM_PRIORITY_CLASSES:
            self.store.put(
                PRIORITY_CLASSES,
                self._new_meta(
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": name},
                        "value": value,
                        "description": description,
                        "preemptionPolicy": admission.PREEMPT_LOWER,
                    },
                    "",
                ),
            )

    def _new_meta(self, obj: Obj, namespace: str) -> Obj:
        meta = dict(obj.get("metadata") or {})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta.setdefault("generation", 1)
        if namespace:
            meta["namespace"] = namespace
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(field, None)
        return {**obj, "metadata": meta}

    def _create_namespace_object(self, ns: Obj) -> Obj:
        ns = self._new_meta(ns, "")
        name = ns["metadata"]["name"]
        ns["metadata"]["labels"] = {**(ns["metadata"].get("labels") or {}), "kubernetes.io/metadata.name": name}
        ns["spec"] = {"finalizers": ["kubernetes"]}
        ns["status"] = {"phase": "Active"}
        stored = self.store.put(NAMESPACES, ns)
        # The service-account controller gives every namespace its "default" ServiceAccount, and the root CA
        # publisher its "kube-root-ca.crt" ConfigMap.
        self.store.put(
            "/serviceaccounts",
            self._new_meta({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, name),
        )
        self.store.put(
            "/configmaps",
            self._new_meta(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA},
                    "data": {"ca.crt": _NO_CA},
                },
                name,
            ),
        )
        return stored

    # --- helpers -----------------------------------------------------------------------------------------------

    def _ns(self, target: Target) -> str:
        return target.namespace or "" if target.rtype.namespaced else ""

    def _existing(self, target: Target, name: str | None = None) -> Obj:
        name = name or target.name or ""
        obj = self.store.get(target.rtype.key, self._ns(target), name)
        if obj is None:
            raise not_found(target.rtype.group, target.rtype.plural, name)
        return obj

    def _require_namespace(self, target: Target, creating: bool) -> None:
        if not target.rtype.namespaced:
            return
        ns = self.store.get(NAMESPACES, "", target.namespace or "")
        if ns is None:
            raise not_found("", "namespaces", target.namespace or "")
        if creating and ns["metadata"].get("deletionTimestamp"):
            raise forbidden(
                target.rtype.group,
                target.rtype.plural,
                "",
                f"unable to create new content in namespace {target.namespace} because it is being terminated",
            )

    def _versioned(self, target: Target, obj: Obj) -> Obj:
        """Custom resources are stored once and served at every version (no conversion between versions)."""
        api_version = target.rtype.api_version(target.version)
        return obj if obj.get("apiVersion") == api_version else {**obj, "apiVersion": api_version}

    def _out(self, target: Target, obj: Obj, code: int = 200) -> Reply:
        return reply(code, self._versioned(target, obj))

    def _decode_body(self, body: bytes) -> Any:
        try:
            return decode(body or b"null")
        except ValueError as error:
            raise bad_request(f"the request body is not valid JSON: {error}") from None

    def body_object(self, target: Target, body: bytes) -> Obj:
        obj = self._decode_body(body)
        if not isinstance(obj, dict):
            raise bad_request("the request body must be a JSON object")
        obj.setdefault("metadata", {})
        if not isinstance(obj["metadata"], dict):
            raise bad_request("metadata must be an object")
        obj["apiVersion"] = target.rtype.api_version(target.version)
        obj["kind"] = target.rtype.kind
        return obj

    # --- create ------------------------------------------------------------------------------------------------

    def create(self, target: Target, body: bytes, dry_run: bool = False) -> Reply:
        if target.subresource == "binding":
            return self.bind(target, body)
        if target.subresource == "eviction":
            return self.evict(target, body)
        if target.name is not None or target.subresource is not None:
            raise method_not_allowed()
        rtype = target.rtype
        obj = self.body_object(target, body)
        meta = obj["metadata"]
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != target.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
            else:
                raise invalid(
                    rtype.kind,
                    rtype.group,
                    "",
                    [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
                )
        name = meta["name"]
        version = str(meta.get("resourceVersion") or "")
        if version.isdigit() and int(version) != 0:  # storage refuses it; the real answer is a bare 500
            raise StatusError(500, "", "resourceVersion should not be set on objects to be created")
        admission.check_name(rtype.kind, rtype.group, name, dns_label=rtype.key == NAMESPACES)
        self._require_namespace(target, creating=True)
        if self.store.get(rtype.key, self._ns(target), name) is not None:
            raise already_exists(rtype.group, rtype.plural, name)
        if rtype.key == NAMESPACES:
            if dry_run:
                return self._out(target, obj, 201)
            return self._out(target, self._create_namespace_object(obj), 201)
        obj = self._new_meta(obj, self._ns(target))
        obj = self._admit_create(target, obj)
        if dry_run:
            return self._out(target, obj, 201)
        stored = self.store.put(rtype.key, obj)
        stored = self._after_write(target, stored)
        return self._out(target, stored, 201)

    def _admit_create(self, target: Target, obj: Obj) -> Obj:
        key = target.rtype.key
        if target.rtype.has_status and key != NODES:
            obj.pop("status", None)
        if key == PODS:
            obj = admission.default_pod(obj, self._objects(PRIORITY_CLASSES))
        elif key == NODES:
            obj = admission.admit_node(obj)
        elif key == PRIORITY_CLASSES:
            obj = admission.admit_priority_class(obj, self._objects(PRIORITY_CLASSES))
        elif key == CRDS:
            obj = self._admit_crd(obj)
        elif key == "/events":
            admission.validate_event(obj)
        elif target.rtype.custom:
            obj = prune_custom_resource(obj, target.rtype.schemas.get(target.version))
        return obj

    def _admit_crd(self, crd: Obj) -> Obj:
        try:
            rtype = from_crd(crd)
        except CatalogError as error:
            field, _, message = str(error).partition(": ")
            raise invalid(
                "CustomResourceDefinition",
                "apiextensions.k8s.io",
                crd["metadata"]["name"],
                [(field, "FieldValueInvalid", message)],
            ) from None
        name = crd["metadata"]["name"]
        if name != f"{rtype.plural}.{rtype.group}":
            raise invalid(
                "CustomResourceDefinition",
                "apiextensions.k8s.io",
                name,
                [
                    (
                        "metadata.name",
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                    )
                ],
            )
        names = crd["spec"]["names"]
        accepted = {
            "plural": rtype.plural,
            "singular": rtype.singular,
            "kind": rtype.kind,
            "listKind": names.get("listKind") or rtype.kind + "List",
        }
        if rtype.short_names:
            accepted["shortNames"] = list(rtype.short_names)
        storage = next((v["name"] for v in crd["spec"]["versions"] if v.get("storage")), rtype.versions[0])
        crd["status"] = {
            "acceptedNames": accepted,
            "storedVersions": [storage],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now(),
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now(),
                },
            ],
        }
        return crd

    def _objects(self, key: str, namespace: str | None = None) -> list[Obj]:
        return [obj for obj, _ in self.store.items(key, namespace)]

    def _after_write(self, target: Target, stored: Obj) -> Obj:
        """Controllers' reactions to a write, each as its own later write (watchers see both)."""
        key = target.rtype.key
        if key == NODES:
            taints = admission.reconcile_node_taints(stored)
            if taints is not None:
                stored = self.store.put(NODES, {**stored, "spec": {**(stored.get("spec") or {}), "taints": taints}})
        elif key in (PODS, PDBS):
            self._sync_budgets(stored["metadata"]["namespace"])
        elif key == CRDS:  # the CRD is stored: its kind is served from now on
            self.catalog.add(from_crd(stored))
        elif key == LEASES and stored["metadata"].get("namespace") == "kube-node-lease":
            self.heartbeats[stored["metadata"]["name"]] = time.monotonic()
        return stored

    def monitor_nodes(self, grace_s: float) -> list[str]:
        """The node lifecycle controller's health pass: nodes whose kubelet has shown no life for ``grace_s``
        (node-monitor-grace-period) get every condition Unknown, then the unreachable taint. Returns their names."""
        silent = []
        moment = time.monotonic()
        for node in self._objects(NODES):
            name = node["metadata"]["name"]
            last = self.heartbeats.setdefault(name, moment)  # first seen now: the grace period starts
            if moment - last < grace_s:
                continue
            marked = admission.mark_unknown(node, now())
            if marked is not None:
                stored = self.store.put(NODES, marked)
                self._after_write(Target(self.catalog.by_key(NODES), "v1", None, name), stored)
                silent.append(name)
        return silent

    def _sync_budgets(self, namespace: str) -> None:
        """The disruption controller: keep every PDB's status in the namespace current."""
        budgets = self._objects(PDBS, namespace)
        if not budgets:
            return
        pods = self._objects(PODS, namespace)
        for pdb in budgets:
            new_status = disruption.status(pdb, disruption.compute(pdb, pods), now())
            old_status = dict(pdb.get("status") or {})
            if _without_times(old_status) != _without_times(new_status):
                self.store.put(PDBS, {**pdb, "status": new_status})

    # --- read --------------------------------------------------------------------------------------------------

    def get(self, target: Target) -> Reply:
        if target.subresource not in (None, "status"):
            raise method_not_allowed()
        self._require_namespace(target, creating=False)
        obj = self._existing(target)
        if not target.rtype.custom:
            raw = self.store.get_raw(target.rtype.key, self._ns(target), target.name or "")
            if raw is not None:
                return Reply(200, raw)
        return self._out(target, obj)

    def list(self, target: Target, query: dict[str, str]) -> Reply:
        rtype = target.rtype
        if rtype.namespaced and target.namespace is not None:
            self._require_namespace(target, creating=False)
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), rtype.plural)
        rv = self.store.rv
        entries = self.store.items(rtype.key, target.namespace if rtype.namespaced else None)
        selected = [(o, raw) for o, raw in entries if labels_match(labels, o) and fields_match(fields, o)]
        start = 0
        token = query.get("continue")
        if token:
            try:
                after = tuple(decode(token.encode()))
            except ValueError:
                raise bad_request("continue key is not valid") from None
            start = next(
                (
                    i
                    for i, (o, _) in enumerate(selected)
                    if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after
                ),
                len(selected),
            )
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise bad_request(f"limit: invalid value {query['limit']!r}") from None
        page = selected[start : start + limit] if limit > 0 else selected[start:]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and start + limit < len(selected):
            last = page[-1][0]["metadata"]
            meta["continue"] = encode([last.get("namespace", ""), last["name"]]).decode()
            meta["remainingItemCount"] = len(selected) - start - limit
        api_version = rtype.api_version(target.version)
        items = [
            raw if o.get("apiVersion") == api_version else encode({**o, "apiVersion": api_version}) for o, raw in page
        ]
        head = encode({"kind": rtype.kind + "List", "apiVersion": api_version, "metadata": meta})
        return Reply(200, head[:-1] + b',"items":[' + b",".join(items) + b"]}")

    # --- update / patch ----------------------------------------------------------------------------------------

    def update(self, target: Target, body: bytes, dry_run: bool = False) -> Reply:
        if target.subresource not in (None, "status") or target.name is None:
            raise method_not_allowed()
        if target.subresource == "status" and not target.rtype.has_status:
            raise not_found(target.rtype.group, target.rtype.plural + "/status", target.name)
        new = self.body_object(target, body)
        meta = new["metadata"]
        if meta.get("name") and meta["name"] != target.name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({target.name})"
            )
        if target.rtype.namespaced and meta.get("namespace") and meta["namespace"] != target.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        self._require_namespace(target, creating=False)
        old = self._existing(target)
        return self._write_update(target, old, new, dry_run)

    def patch(self, target: Target, body: bytes, content_type: str, query: dict[str, str]) -> Reply:
        if target.subresource not in (None, "status") or target.name is None:
            raise method_not_allowed()
        if target.subresource == "status" and not target.rtype.has_status:
            raise not_found(target.rtype.group, target.rtype.plural + "/status", target.name)
        self._require_namespace(target, creating=False)
        dry_run = query.get("dryRun") == "All"
        if content_type.split(";")[0].strip() == APPLY:
            if not query.get("fieldManager"):
                raise bad_request("PATCH, application/apply-patch+yaml requests must supply a fieldManager")
            try:
                applied = yaml.safe_load(body or b"null")
            except yaml.YAMLError as error:
                raise bad_request(f"error decoding YAML: {error}") from None
            return self._apply(target, applied, dry_run)
        patch = self._decode_body(body)
        old = self._existing(target)
        new = apply_patch(
            content_type, clone(self._versioned(target, old)), patch, strategic_allowed=not target.rtype.custom
        )
        new.setdefault("metadata", {})
        patched_rv = new["metadata"].get("resourceVersion")
        # A patch that names a resourceVersion is a precondition on it; one that does not always applies.
        if not (isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})):
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        elif patched_rv != old["metadata"]["resourceVersion"]:
            raise conflict(target.rtype.group, target.rtype.plural, target.name, STALE_OBJECT)
        return self._write_update(target, old, new, dry_run)

    def _apply(self, target: Target, patch: Any, dry_run: bool) -> Reply:
        """Server-side apply, approximated: create when absent, else a strategic merge of the applied config
        (no field ownership, no conflicts between managers)."""
        if not isinstance(patch, dict):
            raise bad_request("apply patch must be an object")
        old = self.store.get(target.rtype.key, self._ns(target), target.name or "")
        if old is None:
            patch.setdefault("metadata", {})["name"] = target.name
            return self.create(Target(target.rtype, target.version, target.namespace), encode(patch), dry_run)
        merge = merge_patch if target.rtype.custom else strategic_merge_patch
        new = merge(clone(old), patch)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._write_update(target, old, new, dry_run)

    def _write_update(self, target: Target, old: Obj, new: Obj, dry_run: bool) -> Reply:
        rtype = target.rtype
        new_rv = new["metadata"].get("resourceVersion")
        if new_rv not in (None, "") and new_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rtype.group, rtype.plural, target.name or "", STALE_OBJECT)
        if target.subresource == "status":
            merged = self._status_update(rtype, old, new)
        else:
            uid = new["metadata"].get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise invalid(
                    rtype.kind,
                    rtype.group,
                    target.name or "",
                    [("metadata.uid", "FieldValueInvalid", f'Invalid value: "{uid}": field is immutable')],
                )
            merged = {**new, "metadata": _keep_immutable_meta(new["metadata"], old["metadata"])}
            meta = merged["metadata"]
            if rtype.has_status:
                if "status" in old:
                    merged["status"] = old["status"]
                else:
                    merged.pop("status", None)
            if rtype.key == PODS:
                admission.check_pod_update(old, merged)
            elif rtype.key == PRIORITY_CLASSES:
                merged = admission.admit_priority_class(merged, self._objects(PRIORITY_CLASSES), old=old)
            elif rtype.key == CRDS:
                merged = self._admit_crd({**merged, "status": old.get("status")})
            elif rtype.custom:
                merged = prune_custom_resource(merged, rtype.schemas.get(target.version))
            if _spec_of(merged) != _spec_of(old):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        merged = {**self._versioned(target, merged)}
        if dry_run:
            return self._out(target, merged)
        if _without_rv(merged) == _without_rv(old):
            return self._out(target, old)  # a no-op write does not bump the resourceVersion, as on the real server
        stored = self.store.put(rtype.key, merged)
        if rtype.key == NODES and target.subresource == "status":
            self.heartbeats[stored["metadata"]["name"]] = time.monotonic()
        if self._finish_if_released(target, stored):
            return self._out(target, stored)
        return self._out(target, self._after_write(target, stored))

    @staticmethod
    def _status_update(rtype: ResourceType, old: Obj, new: Obj) -> Obj:
        """What a write to ``/status`` keeps: custom resources change only status; built-in kinds change status and
        metadata but never spec (pods also keep their ownerReferences), as their status strategies do."""
        if rtype.custom:
            merged = {**old, "status": new.get("status")}
        else:
            merged = {k: v for k, v in old.items() if k not in ("metadata", "status")}
            meta = _keep_immutable_meta(new["metadata"], old["metadata"])
            if rtype.key == PODS:
                meta.pop("ownerReferences", None)
                if "ownerReferences" in old["metadata"]:
                    meta["ownerReferences"] = old["metadata"]["ownerReferences"]
            merged["metadata"] = meta
            merged["status"] = new.get("status")
        if merged.get("status") is None:
            merged.pop("status", None)
        return merged

    def _finish_if_released(self, target: Target, obj: Obj) -> bool:
        """An object being deleted goes once its last finalizer is removed (pods only once their grace is 0)."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        if target.rtype.key == PODS and meta.get("deletionGracePeriodSeconds", 0) > 0:
            return False
        self._remove(target.rtype, meta.get("namespace", ""), meta["name"])
        return True

    # --- delete ------------------------------------------------------------------------------------------------

    def delete(self, target: Target, body: bytes, query: dict[str, str]) -> Reply:
        if target.subresource is not None or target.name is None:
            raise method_not_allowed()
        self._require_namespace(target, creating=False)
        options = self._decode_body(body) if body else {}
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be an object")
        grace = options.get("gracePeriodSeconds")
        if query.get("gracePeriodSeconds") is not None:
            try:
                grace = int(query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request(f"gracePeriodSeconds: invalid value {query['gracePeriodSeconds']!r}") from None
        old = self._existing(target)
        preconditions = options.get("preconditions") or {}
        rtype = target.rtype
        if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
            raise conflict(
                rtype.group,
                rtype.plural,
                target.name,
                f"Precondition failed: UID in precondition: "
                f"{preconditions['uid']}, UID in object meta: {old['metadata']['uid']}",
            )
        if (
            preconditions.get("resourceVersion")
            and preconditions["resourceVersion"] != old["metadata"]["resourceVersion"]
        ):
            raise conflict(
                rtype.group,
                rtype.plural,
                target.name,
                f"Precondition failed: ResourceVersion in "
                f"precondition: {preconditions['resourceVersion']}, ResourceVersion in object meta: "
                f"{old['metadata']['resourceVersion']}",
            )
        if query.get("dryRun") == "All" or options.get("dryRun"):
            return self._out(target, old)
        return self._delete_object(target, old, grace)

    def _delete_object(self, target: Target, old: Obj, grace: int | None) -> Reply:
        rtype = target.rtype
        meta = old["metadata"]
        if rtype.key == PODS:
            spec, phase = old.get("spec") or {}, (old.get("status") or {}).get("phase")
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", 30))
            if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0  # nothing runs it: no kubelet needs to stop containers first
        else:
            grace = 0
        if rtype.key == NAMESPACES:
            return self._delete_namespace(target, old)
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds", 0)
            if rtype.key == PODS and grace == 0 and not meta.get("finalizers"):
                return self._out(target, self._remove(rtype, meta["namespace"], meta["name"]) or old)
            if rtype.key == PODS and grace < current:
                updated = self.store.put(
                    rtype.key,
                    {**old, "metadata": {**meta, "deletionGracePeriodSeconds": grace, "deletionTimestamp": now(grace)}},
                )
                self._finish_if_released(target, updated)
                return self._out(target, updated)
            return self._out(target, old)
        if grace > 0 or meta.get("finalizers"):
            updated = self.store.put(
                rtype.key,
                {**old, "metadata": {**meta, "deletionTimestamp": now(grace), "deletionGracePeriodSeconds": grace}},
            )
            if rtype.key == PODS:
                self._sync_budgets(meta["namespace"])
            return self._out(target, updated)
        final = self._remove(rtype, meta.get("namespace", ""), meta["name"])
        if rtype.key == PODS:
            return self._out(target, final or old)
        details = {"name": meta["name"], "kind": rtype.plural, "uid": meta["uid"]}
        if rtype.group:
            details["group"] = rtype.group
        return reply(200, success_body(200, details))

    def _remove(self, rtype: ResourceType, namespace: str, name: str) -> Obj | None:
        final = self.store.remove(rtype.key, namespace, name)
        if rtype.key == CRDS and final is not None:
            crd_type = from_crd(final)
            for obj, _ in self.store.items(crd_type.key):
                self.store.remove(crd_type.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            self.catalog.remove(crd_type.key)
        elif rtype.key == PODS:
            self._sync_budgets(namespace)
        return final

    def _delete_namespace(self, target: Target, ns: Obj) -> Reply:
        """The namespace controller, at once: every object in it goes (pods without waiting for a kubelet), then
        the namespace itself."""
        name = ns["metadata"]["name"]
        if name in SYSTEM_NAMESPACES:
            raise forbidden("", "namespaces", name, "this namespace may not be deleted")
        terminating = self.store.put(
            NAMESPACES,
            {
                **ns,
                "metadata": {**ns["metadata"], "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0},
                "status": {"phase": "Terminating"},
            },
        )
        for rtype in self.catalog.all():
            if rtype.namespaced:
                for obj, _ in self.store.items(rtype.key, name):
                    self.store.remove(rtype.key, name, obj["metadata"]["name"])
        self.store.remove(NAMESPACES, "", name)
        return self._out(target, terminating)

    def delete_collection(self, target: Target, query: dict[str, str]) -> Reply:
        self._require_namespace(target, creating=False)
        listed = decode(self.list(target, {k: v for k, v in query.items() if k != "limit"}).body)
        grace = int(query["gracePeriodSeconds"]) if query.get("gracePeriodSeconds") else None
        for item in listed["items"]:
            old = self.store.get(target.rtype.key, item["metadata"].get("namespace", ""), item["metadata"]["name"])
            if old is not None:
                self._delete_object(
                    Target(target.rtype, target.version, target.namespace, old["metadata"]["name"]), old, grace
                )
        return reply(200, listed)

    # --- pods/binding, pods/eviction -----------------------------------------------------------------------------

    def bind(self, target: Target, body: bytes) -> Reply:
        if target.rtype.key != PODS:
            raise method_not_allowed()
        binding = self._decode_body(body)
        if not isinstance(binding, dict):
            raise bad_request("the request body must be a Binding object")
        name = target.name or ""
        node = ((binding.get("target") or {}).get("name")) or ""
        if (binding.get("metadata") or {}).get("name") not in (None, name):
            raise bad_request("the name of the object does not match the name on the URL")
        pod = self._existing(target)
        wanted = binding.get("metadata") or {}
        if wanted.get("uid") and wanted["uid"] != pod["metadata"]["uid"]:
            raise conflict(
                "",
                "pods",
                name,
                f"Precondition failed: UID in precondition: {wanted['uid']}, UID in "
                f"object meta: {pod['metadata']['uid']}",
            )
        if wanted.get("resourceVersion") and wanted["resourceVersion"] != pod["metadata"]["resourceVersion"]:
            raise conflict("", "pods", name, STALE_OBJECT)
        if pod["metadata"].get("deletionTimestamp"):
            raise conflict("", "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if not node:  # the real server answers 500 here, not 422
            raise internal_error("target.name: Required value")
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise conflict("", "pods/binding", name, f'pod {name} is already assigned to node "{bound}"')
        annotations = {
            **(pod["metadata"].get("annotations") or {}),
            **((binding.get("metadata") or {}).get("annotations") or {}),
        }
        meta = {**pod["metadata"]}
        if annotations:
            meta["annotations"] = annotations
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now()}
        )
        status["conditions"] = conditions
        self.store.put(PODS, {**pod, "metadata": meta, "spec": {**pod["spec"], "nodeName": node}, "status": status})
        self._sync_budgets(pod["metadata"]["namespace"])
        return reply(201, success_body(201))

    def evict(self, target: Target, body: bytes) -> Reply:
        if target.rtype.key != PODS:
            raise method_not_allowed()
        eviction = self._decode_body(body) if body else {}
        if not isinstance(eviction, dict):
            raise bad_request("the request body must be an Eviction object")
        pod = self._existing(target)
        options = eviction.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        ignore_budget = phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp")
        if not ignore_budget:
            namespace = pod["metadata"]["namespace"]
            budgets = [b for b in self._objects(PDBS, namespace) if disruption.selects(b, pod)]
            if len(budgets) > 1:
                raise internal_error(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                )
            if budgets:
                pdb = budgets[0]
                budget = disruption.compute(pdb, self._objects(PODS, namespace))
                refusal = disruption.eviction_refusal(pdb, budget, pod)
                if refusal is not None:
                    raise too_many_requests(
                        disruption.BUDGET_REFUSAL,
                        retry_after=10,
                        causes=[{"reason": "DisruptionBudget", "message": refusal}],
                    )
        self._delete_object(target, pod, options.get("gracePeriodSeconds"))
        return reply(201, success_body(201))

    # --- events.k8s.io/v1 ----------------------------------------------------------------------------------------

    def events_v1_core(self, target: Target, query: dict[str, str]) -> tuple[Target, dict[str, str]]:
        """The core/v1 Events request an events.k8s.io/v1 one stands for (field selectors in core names)."""
        core = Target(self.catalog.by_key("/events"), "v1", target.namespace, target.name)
        if "fieldSelector" in query:
            query = {**query, "fieldSelector": eventviews.core_field_selector(query["fieldSelector"]) or ""}
        return core, query

    def events_v1(self, verb: str, target: Target, query: dict[str, str], body: bytes, content_type: str) -> Reply:
        """events.k8s.io/v1 Events: the stored core/v1 Events, reshaped on the way in and out."""
        core, query = self.events_v1_core(target, query)
        dry_run = query.get("dryRun") == "All"
        if verb == "create":
            event = self.body_object(target, body)
            eventviews.validate_create(event)
            result = self.create(core, encode(eventviews.to_core(event)), dry_run)
        elif verb == "update":
            result = self.update(core, encode(eventviews.to_core(self.body_object(target, body))), dry_run)
        elif verb == "patch":
            old = eventviews.to_v1(decode(self.get(core).body))
            patch = self._decode_body(body)
            new = apply_patch(content_type, old, patch, strategic_allowed=True)
            if not (isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})):
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            result = self.update(core, encode(eventviews.to_core(new)), dry_run)
        elif verb == "get":
            result = self.get(core)
        elif verb == "delete":
            result = self.delete(core, body, query)
        else:
            listed = decode((self.list(core, query) if verb == "list" else self.delete_collection(core, query)).body)
            listed["apiVersion"] = eventviews.API_VERSION
            listed["items"] = [eventviews.to_v1(item) for item in listed["items"]]
            return reply(200, listed)
        answer = decode(result.body)
        return reply(result.code, eventviews.to_v1(answer) if answer.get("kind") == "Event" else answer)


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


_IMMUTABLE_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "name",
    "generation",
)


def _keep_immutable_meta(new: Obj, old: Obj) -> Obj:
    meta = {k: v for k, v in new.items() if k not in _IMMUTABLE_META}
    meta.update({k: old[k] for k in _IMMUTABLE_META if k in old})
    return meta


def _without_rv(obj: Obj) -> Obj:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}


def _without_times(status: Obj) -> Obj:
    status = dict(status)
    status["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []
    ]
    return status


__all__ = ["Api", "Reply", "StatusError", "Target"]
