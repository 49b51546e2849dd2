"""Trace variants built the way the FGD paper built its multi-GPU and GPU-model-constrained pod lists.

Owns :func:`multi_gpu_variant` and :func:`model_constrained_variant`, pure
functions from a pod list (the shared default trace), a target share and a
random generator to a new pod list, plus :func:`multi_gpu_share` and
:func:`constrained_share`, which measure what they build. Must not read or
write files and must not schedule anything.

* **Multi-GPU share s** (the paper's ``multigpu20…50``): the original pods
  stay; extra pods drawn uniformly with replacement from the list's own
  multi-GPU pods (2, 4 or 8 GPUs) are appended until multi-GPU pods make at
  least ``s`` of the list's GPU request. The released lists grew this way
  (default 8,152 pods → 8,324 / 8,508 / 8,746 / 9,061 for 20 / 30 / 40 / 50 %).
* **Model-constrained share s** (``gpuspec05…33``): the same pods in the same
  order; ``round(s · GPU pods)`` GPU pods chosen uniformly without
  replacement get a ``gpu_spec``. The constraint is drawn from a *spec mix* —
  the constraints carried by pods of a released constrained list, kept per GPU
  count so that an 8-GPU pod only gets model sets that own 8-GPU nodes — with
  replacement, in proportion to how often each occurs there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import PodSpec

MULTI_GPU_SHARES = (0.20, 0.30, 0.40, 0.50)
CONSTRAINED_SHARES = (0.05, 0.10, 0.20, 0.25, 0.34)

#: Constraints seen per GPU count: ``{num_gpu: (allowed-model set, …)}``, one entry per constrained pod.
SpecMix = Mapping[int, Sequence[frozenset[str]]]


def multi_gpu_share(pods: Sequence[PodSpec]) -> float:
    """Share of the GPU request that pods asking for two or more GPUs make."""
    total = sum(p.total_gpu_milli for p in pods)
    if not total:
        return 0.0
    return sum(p.total_gpu_milli for p in pods if p.num_gpu >= 2) / total


def constrained_share(pods: Sequence[PodSpec]) -> float:
    """Share of the GPU pods that carry a GPU-model constraint."""
    gpu_pods = [p for p in pods if p.num_gpu]
    if not gpu_pods:
        return 0.0
    return sum(1 for p in gpu_pods if p.gpu_models) / len(gpu_pods)


def _check_share(share: float) -> None:
    if not 0 < share < 1:
        raise InvalidSpec(f"variant share must be within (0, 1), got {share}")


def multi_gpu_variant(pods: Sequence[PodSpec], share: float, rng: np.random.Generator) -> list[PodSpec]:
    """The pods plus copies of their multi-GPU pods until those make ``share`` of the GPU request."""
    _check_share(share)
    multi = [p for p in pods if p.num_gpu >= 2]
    if not multi:
        raise InvalidSpec("the pod list has no multi-GPU pod to draw extra ones from")
    out = list(pods)
    names = {p.name for p in pods}
    total = sum(p.total_gpu_milli for p in pods)
    big = sum(p.total_gpu_milli for p in multi)
    extra = 0
    while big < share * total:
        source = multi[int(rng.integers(len(multi)))]
        name = f"{source.name}-multi-{extra}"
        while name in names:
            extra += 1
            name = f"{source.name}-multi-{extra}"
        names.add(name)
        out.append(PodSpec(name, source.cpu_milli, source.memory_mib, source.num_gpu, source.gpu_milli))
        big += source.total_gpu_milli
        total += source.total_gpu_milli
        extra += 1
    return out


def spec_mix(pods: Sequence[PodSpec]) -> dict[int, tuple[frozenset[str], ...]]:
    """The constraints the constrained GPU pods of a list carry, grouped by GPU count."""
    mix: dict[int, list[frozenset[str]]] = {}
    for pod in pods:
        if pod.num_gpu and pod.gpu_models:
            mix.setdefault(pod.num_gpu, []).append(pod.gpu_models)
    return {n: tuple(specs) for n, specs in sorted(mix.items())}


def _specs_for(mix: SpecMix, num_gpu: int) -> Sequence[frozenset[str]]:
    """Constraints seen on pods of this GPU count, else on the nearest larger count (they own big enough nodes)."""
    for count in sorted(n for n in mix if n >= num_gpu and mix[n]):
        return mix[count]
    raise InvalidSpec(f"the spec mix has no constraint for a {num_gpu}-GPU pod (or a larger one)")


def model_constrained_variant(
    pods: Sequence[PodSpec], share: float, mix: SpecMix, rng: np.random.Generator
) -> list[PodSpec]:
    """The same pods with ``share`` of the GPU pods (chosen at random) constrained to models drawn from ``mix``.

    Constraints already in ``pods`` are dropped first, so the share is exact.
    """
    _check_share(share)
    gpu_at = [i for i, p in enumerate(pods) if p.num_gpu]
    if not gpu_at:
        raise InvalidSpec("the pod list has no GPU pod to constrain")
    chosen = rng.choice(len(gpu_at), size=round(share * len(gpu_at)), replace=False)
    out = [_with_models(p, frozenset()) if p.gpu_models else p for p in pods]
    for k in sorted(int(c) for c in chosen):
        i = gpu_at[k]
        specs = _specs_for(mix, pods[i].num_gpu)
        out[i] = _with_models(pods[i], specs[int(rng.integers(len(specs)))])
    return out


def _with_models(pod: PodSpec, models: frozenset[str]) -> PodSpec:
    return PodSpec(
        pod.name,
        pod.cpu_milli,
        pod.memory_mib,
        pod.num_gpu,
        pod.gpu_milli,
        models,
        pod.priority,
        pod.group,
        pod.min_member,
    )
