"""What the scheduler schedules and where: node and pod specifications.

Owns :class:`NodeSpec` and :class:`PodSpec`, immutable values with their
validation (GPU-milli ranges, fractional pods only on one GPU), and the shape
key that groups pods the scheduling policies cannot tell apart. Must not hold
cluster state, do I/O or know any policy.

Units: CPU in millicores, memory in MiB, GPU shares in GPU-milli (1000 = one
whole GPU). A pod asks for ``num_gpu`` GPUs with ``gpu_milli`` on each; a
fractional pod (``gpu_milli`` < 1000) always asks for exactly one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubegpu.scheduling.core.errors import InvalidSpec

MILLI = 1000  # GPU-milli of one whole GPU

#: A pod's shape as the GPU policies see it: (cpu_milli, num_gpu, gpu_milli, allowed models).
Shape = tuple[int, int, int, frozenset[str]]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine: allocatable CPU and memory, a number of identical GPUs of one model."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    model: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpec("node has an empty name")
        for what, value in (("cpu_milli", self.cpu_milli), ("memory_mib", self.memory_mib), ("gpus", self.gpus)):
            if value < 0:
                raise InvalidSpec(f"node {self.name}: {what} must not be negative, got {value}")
        if self.gpus and not self.model:
            raise InvalidSpec(f"node {self.name}: has {self.gpus} GPUs but no GPU model")


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One task: CPU, memory and GPU requests, allowed GPU models, priority and gang membership.

    ``gpu_models`` empty means any model. ``group``/``min_member`` name a gang:
    pods sharing a group are placed all together (at least ``min_member`` of
    them) or not at all.
    """

    name: str
    cpu_milli: int
    memory_mib: int = 0
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] = field(default_factory=frozenset)
    priority: int = 0
    group: str = ""
    min_member: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpec("pod has an empty name")
        for what, value in (("cpu_milli", self.cpu_milli), ("memory_mib", self.memory_mib), ("num_gpu", self.num_gpu)):
            if value < 0:
                raise InvalidSpec(f"pod {self.name}: {what} must not be negative, got {value}")
        if not 0 <= self.gpu_milli <= MILLI:
            raise InvalidSpec(f"pod {self.name}: gpu_milli must be within 0..{MILLI}, got {self.gpu_milli}")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise InvalidSpec(
                f"pod {self.name}: num_gpu={self.num_gpu} and gpu_milli={self.gpu_milli} disagree "
                "(both zero for a CPU-only pod, both positive otherwise)"
            )
        if self.gpu_milli < MILLI and self.num_gpu > 1:
            raise InvalidSpec(
                f"pod {self.name}: a fractional request ({self.gpu_milli} milli) must ask for one GPU, "
                f"not {self.num_gpu}"
            )

    @property
    def total_gpu_milli(self) -> int:
        """GPU-milli this pod takes from the cluster (a 0.5-GPU pod takes 500)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_fractional(self) -> bool:
        """True for a GPU-sharing pod: part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def shape(self) -> Shape:
        """The key under which GPU policies treat pods alike (memory is not part of it)."""
        return (self.cpu_milli, self.num_gpu, self.gpu_milli, self.gpu_models)

    @property
    def affinity_class(self) -> str:
        """GPU affinity class used by the Clustering policy: ``no-gpu``, ``share-gpu`` or ``<n>-gpu``."""
        if self.num_gpu == 0:
            return "no-gpu"
        if self.is_fractional:
            return "share-gpu"
        return f"{self.num_gpu}-gpu"
