"""Pod metadata for series labels: a pod's UID and its labels as Prometheus label pairs.

Owns what dcgm-exporter does with a pod object for ``--kubernetes-enable-pod-labels``,
``--kubernetes-pod-label-allowlist-regex`` and ``--kubernetes-enable-pod-uid``: keep a label when any
allowlist regex matches somewhere in its key (no regexes: every label; matched against the key as
Kubernetes spells it, as upstream), and spell the key as a Prometheus label name by replacing every
character outside ``[a-zA-Z0-9_]`` with ``_`` (``app.kubernetes.io/name`` -> ``app_kubernetes_io_name``).
Where upstream stops short, we go one step further so the page stays valid: a key starting with a digit
gets a leading ``_``, and of two keys that sanitise alike the first in key order wins (upstream's
pick is random). Pure: no I/O; must not know how the pods are fetched (:mod:`kubegpu.monitoring.kubernetes`)
or how series are written (:mod:`kubegpu.monitoring.render`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_INVALID = re.compile(r"[^a-zA-Z0-9_]")

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PodMeta:
    """What the series of one pod's containers carry besides pod/namespace/container."""

    uid: str
    labels: Pairs = ()  # sanitised label name -> value, sorted by name


def sanitize_label_name(key: str) -> str:
    """A Kubernetes label key as a Prometheus label name (dcgm-exporter's rule, plus a ``_`` before a digit)."""
    name = _INVALID.sub("_", key)
    return f"_{name}" if name[:1].isdigit() else name


def compile_allowlist(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The allowlist regexes; raises ``re.error`` naming the first that does not compile."""
    return tuple(re.compile(p) for p in patterns)


def select_labels(labels: Mapping[str, str], allow: Sequence[re.Pattern[str]] = ()) -> Pairs:
    """The pod's labels that pass the allowlist, with sanitised names, sorted by name."""
    out: dict[str, str] = {}
    for key in sorted(labels):
        if allow and not any(p.search(key) for p in allow):
            continue
        out.setdefault(sanitize_label_name(key), str(labels[key]))
    return tuple(sorted(out.items()))


def from_pod(pod: Mapping[str, Any], allow: Sequence[re.Pattern[str]] = ()) -> tuple[str, str, PodMeta]:
    """``(namespace, name, PodMeta)`` of a Pod object as the API returns it (a dict)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        PodMeta(uid=str(meta.get("uid") or ""), labels=select_labels(labels, allow)),
    )
