"""Pod manifests: what the emulator reads from a Pod and how it checks it.

Owns the Pod model the emulator admits (name, namespace, uid, init and app
containers with their extended-resource limits), parsing it from a manifest
(the dict of a ``kind: Pod`` YAML/JSON document), the apiserver validations
that matter for devices (integer extended quantities, requests equal to
limits, unique container names, ``restartPolicy: Always`` only on init
containers) and the minimal manifest it is stored as. Pure: no I/O; errors
name the field like the apiserver does (``spec.containers[0].resources...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kubegpu.kubelet import errors, resourcename

# Kubernetes quantity: signed decimal number, then a binary-SI, decimal-SI or exponent suffix.
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{s: Fraction(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}


@dataclass(frozen=True)
class Container:
    """One container of a pod, with the integer limits of its extended resources in manifest order."""

    name: str
    limits: tuple[tuple[str, int], ...] = ()
    init: bool = False
    #: An init container with ``restartPolicy: Always`` (a sidecar): its devices stay exclusive to it.
    restartable: bool = False

    def limit(self, resource: str) -> int | None:
        return dict(self.limits).get(resource)


@dataclass(frozen=True)
class Pod:
    """A pod as the kubelet's device manager sees it."""

    namespace: str
    name: str
    uid: str
    init_containers: tuple[Container, ...] = ()
    containers: tuple[Container, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def all_containers(self) -> Iterator[Container]:
        """Init containers first, then app containers, each in spec order: the kubelet's admission order."""
        yield from self.init_containers
        yield from self.containers

    def with_uid(self, uid: str) -> Pod:
        return Pod(self.namespace, self.name, uid, self.init_containers, self.containers)

    def to_manifest(self) -> dict[str, object]:
        """A minimal Pod manifest that :func:`parse` turns back into this pod."""

        def container(c: Container) -> dict[str, object]:
            data: dict[str, object] = {"name": c.name}
            if c.restartable:
                data["restartPolicy"] = "Always"
            if c.limits:
                data["resources"] = {"limits": dict(c.limits)}
            return data

        spec: dict[str, object] = {"containers": [container(c) for c in self.containers]}
        if self.init_containers:
            spec["initContainers"] = [container(c) for c in self.init_containers]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
            "spec": spec,
        }


def parse_quantity(value: object) -> Fraction:
    """A Kubernetes resource quantity (``2``, ``"2"``, ``"1k"``, ``"500m"``) as an exact number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"quantities must be a number or a string, got {type(value).__name__}")
    text = repr(value) if isinstance(value, float) else str(value)
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a quantity")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    return Fraction(number) * _SUFFIX[suffix]


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise errors.PodManifestError(f"{where}: must be a mapping, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _quantities(value: object, where: str) -> dict[str, tuple[object, Fraction]]:
    out: dict[str, tuple[object, Fraction]] = {}
    for key, raw in _mapping(value, where).items():
        try:
            out[str(key)] = (raw, parse_quantity(raw))
        except ValueError as exc:
            raise errors.PodManifestError(f"{where}[{key}]: {exc}") from None
    return out


def _container(data: object, where: str, init: bool) -> Container:
    c = _mapping(data, where)
    name = c.get("name")
    if not isinstance(name, str) or not name:
        raise errors.PodManifestError(f"{where}.name: Required value")
    restart = c.get("restartPolicy")
    if restart is not None:
        if not init:
            raise errors.PodManifestError(f"{where}.restartPolicy: Forbidden: may not be set for non-init containers")
        if restart != "Always":
            raise errors.PodManifestError(
                f'{where}.restartPolicy: Unsupported value: "{restart}": supported values: "Always"'
            )
    resources = _mapping(c.get("resources") or {}, f"{where}.resources")
    limits = _quantities(resources.get("limits") or {}, f"{where}.resources.limits")
    requests = _quantities(resources.get("requests") or {}, f"{where}.resources.requests")
    extended: list[tuple[str, int]] = []
    for resource, (raw, quantity) in limits.items():
        if not resourcename.is_extended(resource):
            continue
        if quantity.denominator != 1:
            raise errors.PodManifestError(
                f'{where}.resources.limits[{resource}]: Invalid value: "{raw}": must be an integer'
            )
        if quantity < 0:
            raise errors.PodManifestError(
                f'{where}.resources.limits[{resource}]: Invalid value: "{raw}": must be greater than or equal to 0'
            )
        extended.append((resource, int(quantity)))
    for resource, (raw, quantity) in requests.items():
        if not resourcename.is_extended(resource):
            continue
        # Extended resources cannot be overcommitted, so the apiserver demands requests == limits.
        if resource not in limits:
            raise errors.PodManifestError(
                f"{where}.resources.limits[{resource}]: Required value: "
                "Limit must be set for non overcommitable resources"
            )
        if quantity != limits[resource][1]:
            raise errors.PodManifestError(
                f'{where}.resources.requests[{resource}]: Invalid value: "{raw}": '
                f"must be equal to {resource} limit of {limits[resource][0]}"
            )
    return Container(name=name, limits=tuple(extended), init=init, restartable=init and restart == "Always")


def parse(data: object, uid: str | None = None) -> Pod:
    """Check a Pod manifest and return the pod; ``uid`` is used when ``metadata.uid`` is absent.

    Raises :class:`~kubegpu.kubelet.errors.PodManifestError` naming the field at fault.
    """
    doc = _mapping(data, "manifest")
    if doc.get("kind") != "Pod":
        raise errors.PodManifestError(f"kind: must be Pod, got {doc.get('kind')!r}")
    if doc.get("apiVersion") != "v1":
        raise errors.PodManifestError(f"apiVersion: must be v1 for a Pod, got {doc.get('apiVersion')!r}")
    meta = _mapping(doc.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise errors.PodManifestError("metadata.name: Required value")
    namespace = meta.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise errors.PodManifestError("metadata.namespace: must be a non-empty string")
    pod_uid = meta.get("uid", uid)
    if pod_uid is not None and (not isinstance(pod_uid, str) or not pod_uid):
        raise errors.PodManifestError("metadata.uid: must be a non-empty string")
    spec = _mapping(doc.get("spec"), "spec")
    raw_containers = spec.get("containers")
    if not isinstance(raw_containers, list) or not raw_containers:
        raise errors.PodManifestError("spec.containers: Required value: a pod needs at least one container")
    raw_init = spec.get("initContainers") or []
    if not isinstance(raw_init, list):
        raise errors.PodManifestError(f"spec.initContainers: must be a list, got {_kind(raw_init)}")
    init = tuple(_container(c, f"spec.initContainers[{i}]", True) for i, c in enumerate(raw_init))
    app = tuple(_container(c, f"spec.containers[{i}]", False) for i, c in enumerate(raw_containers))
    seen: set[str] = set()
    for field, group in (("spec.initContainers", init), ("spec.containers", app)):
        for i, c in enumerate(group):
            if c.name in seen:
                raise errors.PodManifestError(f'{field}[{i}].name: Duplicate value: "{c.name}"')
            seen.add(c.name)
    return Pod(namespace=namespace, name=name, uid=pod_uid or "", init_containers=init, containers=app)
