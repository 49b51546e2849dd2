"""Excerpts of a ``/metrics`` page for people: the series of one metric that carry pod labels.

Owns picking and shortening lines for display (the demo prints a few after admitting pods). Pure
text in, text out; must not fetch pages or decide what the exporter serves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Labels left out by default when showing a line: long, and the same on every series of a node.
NOISY_LABELS = ("UUID", "pci_bus_id", "device", "modelName", "DCGM_FI_DRIVER_VERSION", "Hostname", "hostname")

_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def pod_lines(page: str, metric: str = "DCGM_FI_DEV_GPU_UTIL", drop: Iterable[str] = NOISY_LABELS) -> list[str]:
    """Lines of ``metric`` that carry a ``pod`` label, with the ``drop`` labels left out, in page order.

    ``DCGM_FI_DEV_GPU_UTIL{gpu="2",…,container="main",namespace="ml",pod="train"} 87`` becomes
    ``DCGM_FI_DEV_GPU_UTIL{gpu="2",container="main",namespace="ml",pod="train"} 87``.
    """
    dropped = frozenset(drop)
    prefix = metric + "{"
    out = []
    for line in page.split("\n"):
        if not line.startswith(prefix):
            continue
        labels_text, _, value = line[len(prefix) :].rpartition("} ")
        pairs = _LABEL.findall(labels_text)
        if not any(name == "pod" for name, _ in pairs):
            continue
        kept = ",".join(f'{name}="{text}"' for name, text in pairs if name not in dropped)
        out.append(f"{metric}{{{kept}}} {value}")
    return out
