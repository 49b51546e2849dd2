"""What MPS sharing runs: one control daemon per MPS-shared resource, its directories, environment and limits.

Owns the plan, as NVIDIA's daemon makes it: which resources get a daemon
(replicated, non-MIG resources under MPS sharing), their pipe and log directories
under the MPS root as the containers see it (``/mps``, NVIDIA's fixed container
root), the daemon environment, the per-GPU pinned-memory limit
``<memory / replicas>M`` and the default active-thread percentage
``100 / replicas``, and the readiness file names. Pure: running the daemons is
:mod:`.control`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubegpu.deviceplugin.rm.resource_map import ResourceMap
from kubegpu.gpu.model import Machine

READY_FILE = ".ready"
STARTED_FILE = ".started"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"


def pipe_dir(root: Path, resource: str) -> Path:
    """``<root>/<resource>/pipe``: the daemon's ``CUDA_MPS_PIPE_DIRECTORY`` (NVIDIA's ``Root.PipeDir``)."""
    return root / resource / "pipe"


def log_dir(root: Path, resource: str) -> Path:
    """``<root>/<resource>/log``: the daemon's ``CUDA_MPS_LOG_DIRECTORY``."""
    return root / resource / "log"


def daemon_env(root: Path, resource: str) -> dict[str, str]:
    """What the daemon of ``resource`` and every control command to it run with."""
    return {PIPE_ENV: str(pipe_dir(root, resource)), LOG_ENV: str(log_dir(root, resource))}


@dataclass(frozen=True)
class GpuShare:
    """One GPU a daemon serves: its NVML index and UUID, and its memory."""

    index: int
    uuid: str
    memory_mib: int


@dataclass(frozen=True)
class DaemonPlan:
    """What one daemon is: its resource, replicas, GPUs and directories under ``root``."""

    resource: str
    replicas: int
    gpus: tuple[GpuShare, ...]
    root: Path

    @property
    def directory(self) -> Path:
        return self.root / self.resource

    @property
    def pipe_dir(self) -> Path:
        return pipe_dir(self.root, self.resource)

    @property
    def log_dir(self) -> Path:
        return log_dir(self.root, self.resource)

    @property
    def started_file(self) -> Path:
        return self.directory / STARTED_FILE

    @property
    def env(self) -> dict[str, str]:
        return daemon_env(self.root, self.resource)

    @property
    def active_thread_percentage(self) -> int:
        """``100 / replicas`` with integer division, as NVIDIA (3 replicas: 33)."""
        return 100 // self.replicas

    def pinned_mem_limit_mib(self, gpu: GpuShare) -> int:
        """Each client's share of the GPU's memory, in MiB (``total / replicas``, rounded down)."""
        return gpu.memory_mib // self.replicas

    def commands(self) -> list[str]:
        """The control commands sent after start, in order."""
        lines = [f"set_default_device_pinned_mem_limit {g.index} {self.pinned_mem_limit_mib(g)}M" for g in self.gpus]
        lines.append(f"set_default_active_thread_percentage {self.active_thread_percentage}")
        return lines


def daemons(resources: ResourceMap, machine: Machine, root: Path) -> list[DaemonPlan]:
    """One daemon per MPS-shared resource with devices (MIG resources never: MPS is refused on them)."""
    plans = []
    for resource in resources:
        if resource.sharing != "mps" or not resource.devices:
            continue
        if any(d.mig is not None for d in resource.devices):
            continue
        indices = sorted({d.gpu_index for d in resource.devices if d.replica is not None})
        gpus = tuple(GpuShare(i, machine.gpus[i].uuid, machine.gpus[i].memory_mib) for i in indices)
        plans.append(DaemonPlan(resource.name, resource.replicas, gpus, root))
    return plans
