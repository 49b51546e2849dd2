"""The built-in cluster and workload, shaped like the Alibaba GPU trace, for runs without files.

Owns the node inventory of the trace's 1,213 GPU nodes (15 node shapes with
their counts) and a table of the trace's 64 most common pod shapes with their
counts (99 % of its 8,152 pods; every multi-GPU shape kept), and the functions
that expand them to node and pod lists at any scale. Must not read files.
The counts come from ``openb_node_list_gpu_node.csv`` and
``openb_pod_list_default.csv`` of cluster-trace-gpu-v2023.
"""

from __future__ import annotations

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import NodeSpec, PodSpec

#: (count, model, GPUs, CPU milli, memory MiB)
NODE_SHAPES: tuple[tuple[int, str, int, int, int], ...] = (
    (549, "G2", 8, 96000, 393216),
    (387, "T4", 2, 104000, 524288),
    (107, "P100", 2, 16000, 122880),
    (39, "G3", 8, 128000, 786432),
    (28, "V100M16", 4, 32000, 131072),
    (22, "P100", 2, 64000, 262144),
    (21, "V100M32", 8, 96000, 786432),
    (19, "V100M16", 1, 8000, 32768),
    (17, "T4", 4, 96000, 393216),
    (9, "V100M32", 4, 48000, 376832),
    (7, "V100M16", 8, 64000, 262144),
    (3, "P100", 1, 8000, 61440),
    (2, "P100", 2, 8000, 61440),
    (2, "A10", 1, 128000, 1048576),
    (1, "V100M16", 8, 82000, 344064),
)

#: (GPUs, GPU-milli per GPU, CPU milli, memory MiB, count in the trace)
POD_SHAPES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 810, 3152, 5600, 1047),
    (1, 1000, 11300, 49152, 874),
    (1, 1000, 11400, 48128, 599),
    (1, 1000, 3152, 5600, 470),
    (1, 470, 11908, 47104, 388),
    (0, 0, 12500, 57344, 366),
    (1, 470, 8000, 30517, 360),
    (1, 1000, 12000, 24576, 326),
    (0, 0, 32000, 49152, 290),
    (1, 1000, 18708, 64512, 255),
    (1, 650, 11908, 47104, 237),
    (1, 320, 4000, 22888, 232),
    (1, 1000, 9810, 41560, 195),
    (0, 0, 8000, 30517, 185),
    (1, 1000, 8000, 16384, 164),
    (1, 1000, 4000, 24576, 159),
    (1, 1000, 15700, 58368, 158),
    (1, 1000, 11908, 47104, 153),
    (1, 1000, 16000, 32768, 150),
    (1, 230, 4000, 30517, 122),
    (1, 460, 6000, 6144, 120),
    (0, 0, 15400, 51200, 120),
    (0, 0, 16500, 51200, 95),
    (1, 1000, 14200, 58368, 93),
    (1, 1000, 24200, 93184, 84),
    (1, 590, 3152, 5600, 75),
    (1, 320, 8000, 30517, 72),
    (1, 550, 4152, 10600, 72),
    (1, 1000, 11900, 77824, 55),
    (1, 160, 4000, 15258, 54),
    (1, 370, 4152, 10600, 45),
    (1, 220, 4000, 15258, 43),
    (1, 1000, 8200, 33792, 41),
    (1, 1000, 15200, 80896, 36),
    (1, 810, 4152, 10600, 31),
    (1, 1000, 16400, 125952, 29),
    (1, 320, 1000, 2048, 22),
    (1, 160, 6000, 22888, 20),
    (1, 220, 8000, 30517, 19),
    (8, 1000, 88000, 327680, 18),
    (1, 110, 4000, 22888, 18),
    (1, 480, 4000, 22888, 18),
    (1, 230, 8000, 30517, 18),
    (8, 1000, 64200, 263168, 18),
    (1, 1000, 1000, 6144, 15),
    (0, 0, 16000, 31250, 14),
    (1, 650, 8000, 30517, 12),
    (1, 1000, 7000, 30000, 11),
    (0, 0, 11400, 57344, 11),
    (4, 1000, 32200, 132096, 9),
    (1, 1000, 15400, 90112, 9),
    (1, 1000, 6000, 32768, 8),
    (1, 1000, 14900, 73728, 8),
    (1, 1000, 2000, 16384, 8),
    (2, 1000, 16200, 66560, 7),
    (8, 1000, 120000, 737280, 3),
    (2, 1000, 6000, 65536, 3),
    (8, 1000, 64000, 262144, 3),
    (4, 1000, 32000, 131072, 3),
    (2, 1000, 30200, 160768, 3),
    (4, 1000, 60200, 320512, 3),
    (2, 1000, 17400, 43008, 2),
    (8, 1000, 120200, 640000, 2),
    (2, 1000, 14000, 60000, 1),
)


def _scaled(counts: list[int], total: int) -> list[int]:
    """Counts scaled to sum to ``total`` by largest remainder, every non-zero count kept at least 1."""
    whole = sum(counts)
    exact = [c * total / whole for c in counts]
    out = [max(1, int(x)) for x in exact]
    rest = sorted(range(len(counts)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    i = 0
    while sum(out) < total:
        out[rest[i % len(rest)]] += 1
        i += 1
    return out


def synthetic_nodes(scale: float = 1.0) -> list[NodeSpec]:
    """The trace's GPU-node inventory, every shape's count times ``scale`` (at least one each)."""
    if not 0 < scale <= 10:
        raise InvalidSpec(f"scale must be in (0, 10], got {scale}")
    nodes: list[NodeSpec] = []
    for count, model, gpus, cpu, mem in NODE_SHAPES:
        for _ in range(max(1, round(count * scale))):
            nodes.append(NodeSpec(f"syn-node-{len(nodes):04d}", cpu, mem, gpus, model))
    return nodes


def synthetic_pods(scale: float = 1.0) -> list[PodSpec]:
    """About 8,152 × ``scale`` pods in the trace's mix of shapes, in table order (the simulator shuffles)."""
    if not 0 < scale <= 10:
        raise InvalidSpec(f"scale must be in (0, 10], got {scale}")
    counts = _scaled([s[4] for s in POD_SHAPES], max(len(POD_SHAPES), round(8152 * scale)))
    pods: list[PodSpec] = []
    for (gpus, milli, cpu, mem, _), count in zip(POD_SHAPES, counts, strict=True):
        for _ in range(count):
            pods.append(PodSpec(f"syn-pod-{len(pods):05d}", cpu, mem, gpus, milli))
    return pods
