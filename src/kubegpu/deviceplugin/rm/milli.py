"""Fractional GPUs: the rules of ``kubegpu.io/gpu-milli``, whose devices are thousandths of one GPU each.

Owns, for a resource whose devices are milli units (``<uuid>::m<k>``, :func:`kubegpu.deviceplugin.naming.milli_id`):
which GPU a request's units come from — always ONE GPU, so a share is never spread — chosen best fit as the
simulator's GPU-share picker does (the GPU with the fewest available units that still has enough, lowest index on
ties; the must-include units fix the GPU); the check that an Allocate's units lie on one GPU; and the share a
container is told about (``KUBEGPU_GPU_MILLI``, HAMi-style ``CUDA_DEVICE_MEMORY_LIMIT``/``CUDA_DEVICE_SM_LIMIT``,
and with MPS ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``/``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``). Pure: no I/O. Which GPUs
are advertised this way is :mod:`kubegpu.deviceplugin.rm.resource_map`'s (``--gpu-milli``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.naming import MILLI_PER_GPU, REPLICA_SEPARATOR
from kubegpu.deviceplugin.rm.resources import Resource

#: The share in thousandths of the GPU (kubegpu's own, for any runtime or library that enforces it).
MILLI_ENV = "KUBEGPU_GPU_MILLI"
#: HAMi-core's device memory limit (``<MiB>m``) and SM limit (percent), which its CUDA hook enforces.
MEMORY_LIMIT_ENV = "CUDA_DEVICE_MEMORY_LIMIT"
SM_LIMIT_ENV = "CUDA_DEVICE_SM_LIMIT"
#: The MPS client limits (CUDA MPS documentation): active thread percentage, pinned memory per device.
MPS_THREADS_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MPS_MEMORY_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"


class ShareError(DevicePluginError, ValueError):
    """A request the one-GPU rule refuses; the message says why (the caller words it for its RPC)."""


def by_gpu(ids: Iterable[str]) -> dict[str, list[str]]:
    """Unit IDs (``<uuid>::m<k>``) grouped by their GPU's UUID, duplicates dropped.

    The GPU is read off the ID, and the groups are cut from the sorted IDs by bisection, so the per-ID work is
    C's: 8000 units group in about a millisecond.
    """
    ordered = sorted(set(ids))
    groups: dict[str, list[str]] = {}
    start = 0
    while start < len(ordered):
        gpu = ordered[start].partition(REPLICA_SEPARATOR)[0]
        end = bisect.bisect_right(ordered, f"{gpu}{REPLICA_SEPARATOR}\U0010ffff", lo=start)
        groups[gpu] = ordered[start:end]
        start = end
    return groups


def pick(resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """``size`` units from one GPU: the must-include units' GPU, else the best fit among the available.

    Raises :class:`ShareError` when the must-include units span GPUs or no single GPU has ``size`` units.
    """
    if size > MILLI_PER_GPU:
        raise ShareError(f"a share of {size} is more than one GPU ({MILLI_PER_GPU})")
    must = list(dict.fromkeys(must_include))
    groups = by_gpu([*must, *available])
    if must:
        home = by_gpu(must)
        if len(home) > 1:
            raise ShareError(f"must-include units lie on {len(home)} GPUs ({', '.join(home)}); a share is on one GPU")
        gpu = next(iter(home))
        if len(groups[gpu]) < size:
            raise ShareError(f"GPU {gpu} has {len(groups[gpu])} units available, fewer than {size}")
    else:
        fitting = [g for g, units in groups.items() if len(units) >= size]
        if not fitting:
            most = max((len(u) for u in groups.values()), default=0)
            raise ShareError(f"no single GPU has {size} units available (at most {most} on one GPU)")
        index = {g: resource.by_id[units[0]].gpu_index for g, units in groups.items()}
        gpu = min(fitting, key=lambda g: (len(groups[g]), index[g]))
    held = set(must)
    rest = [u for u in groups[gpu] if u not in held]
    return must + rest[: size - len(must)]


def one_gpu(resource: Resource, ids: Sequence[str]) -> str:
    """The one GPU (UUID) ``ids`` lie on; :class:`ShareError` when they span several."""
    groups = by_gpu(ids)
    if len(groups) != 1:
        raise ShareError(f"units spread over {len(groups)} GPUs ({', '.join(groups)}); a share must be on one GPU")
    return next(iter(groups))


def share_env(resource: Resource, ids: Sequence[str], mps: bool) -> dict[str, str]:
    """The env telling a container its share of its one GPU (device 0 inside it)."""
    units = len(set(ids))
    memory = resource.by_id[ids[0]].memory_mib * units // MILLI_PER_GPU
    percent = max(1, units * 100 // MILLI_PER_GPU)
    env = {MILLI_ENV: str(units), MEMORY_LIMIT_ENV: f"{memory}m", SM_LIMIT_ENV: str(percent)}
    if mps:
        env[MPS_THREADS_ENV] = str(percent)
        env[MPS_MEMORY_ENV] = f"0={memory}M"
    return env
