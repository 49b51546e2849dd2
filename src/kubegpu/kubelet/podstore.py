"""The pods the emulator has admitted: its stand-in for the apiserver's pod list.

Owns the list of admitted pods in admission order, lookups by uid and by
``namespace/name``, and its file ``<socket dir>/.kubegpu-kubelet/pods.json``
(written atomically), so that names survive a restart: the kubelet's
checkpoint only knows pod uids. Pods of the store are the kubelet's *active
pods*; allocations of any other pod are garbage. Must not touch devices.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

from kubegpu.kubelet import errors, files, pod

log = logging.getLogger(__name__)

_VERSION = 1


class PodStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._pods: dict[str, pod.Pod] = {}

    def __iter__(self) -> Iterator[pod.Pod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def uids(self) -> set[str]:
        return set(self._pods)

    def get(self, uid: str) -> pod.Pod | None:
        return self._pods.get(uid)

    def find(self, namespace: str, name: str) -> pod.Pod | None:
        return next((p for p in self._pods.values() if p.namespace == namespace and p.name == name), None)

    def put(self, p: pod.Pod) -> None:
        self._pods[p.uid] = p
        self.save()

    def remove(self, uid: str) -> pod.Pod | None:
        gone = self._pods.pop(uid, None)
        if gone is not None:
            self.save()
        return gone

    def save(self) -> None:
        if self.path is None:
            return
        doc = {"version": _VERSION, "pods": [p.to_manifest() for p in self._pods.values()]}
        files.write_atomic(self.path, json.dumps(doc, indent=1).encode())

    def load(self) -> None:
        """Read the file if there is one; raises :class:`~kubegpu.kubelet.errors.PodStoreError` naming it.

        Unlike a corrupt checkpoint, a corrupt store is not skipped: without it every pod would count as never
        admitted and all allocations would be dropped silently. The operator moves the file away to start empty.
        """
        if self.path is None or not self.path.exists():
            return
        fix = "move it away to start with no pods"
        try:
            doc = json.loads(self.path.read_bytes())
            if not isinstance(doc, dict) or doc.get("version") != _VERSION or not isinstance(doc.get("pods"), list):
                raise ValueError(f"not a version {_VERSION} pod store")
            pods = [pod.parse(m) for m in doc["pods"]]
        except OSError as exc:
            raise errors.PodStoreError(f"pod store {self.path}: cannot read: {exc.strerror or exc}; {fix}") from None
        except (ValueError, errors.PodManifestError) as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise errors.PodStoreError(f"pod store {self.path}: corrupt: {exc}; {fix}") from None
        self._pods = {p.uid: p for p in pods if p.uid}
