"""Placement inside one node: which GPUs (or replicas, or MIG devices) to give a request.

Pure policies over a node's topology, used by the device plugin's
GetPreferredAllocation and by the scheduler. Imports only :mod:`kubegpu.gpu`
(and numpy, lazily, for nodes of more than 12 GPUs); no I/O, no gRPC, no
clocks, no threads — the only state is a cache of per-topology tables that
never changes an answer.

The API (everything else is internal)::

    from kubegpu import placement

    placement.pick(policy, topology, available, must_include, size) -> list[int]
        whole GPUs by index, ascending. policy: "topology" (default) or
        "best-effort" (go-gpuallocator's choice, exactly).
    placement.pick_shared(policy, devices, available, must_include, size) -> list[str]
        replicas or MIG devices by ID: must_include as given, then the picks.
        devices: [placement.SharedDevice(id, group)], group = the physical GPU.
        policy: "distributed" (default) or "packed".
    placement.link_matrix(topology) -> list[list[str]]
        the pair cells ``kubegpu topology show`` prints ("X", "NV12,SYS", "PIX").
    placement.prepare(policy, topology)
        build the cached tables now instead of on the first request.
    placement.PlacementError
        an impossible or malformed request (the message names the value);
        the plugin answers gRPC INVALID_ARGUMENT.

Policy names: ``WHOLE_GPU_POLICIES``, ``SHARED_POLICIES``, ``POLICIES``,
``DEFAULT_WHOLE_GPU_POLICY``, ``DEFAULT_SHARED_POLICY``.

Modules: :mod:`~kubegpu.placement.weights` (pair weights per policy),
:mod:`~kubegpu.placement.partition` (the exact, fast best-effort solver),
:mod:`~kubegpu.placement.vectorised` (its numpy tables for 13-16 GPUs),
:mod:`~kubegpu.placement.reference` (the literal, slow enumeration it is
tested against), :mod:`~kubegpu.placement.shared` (distributed/packed),
:mod:`~kubegpu.placement.matrix` (the pair cells as ``nvidia-smi topo -m`` spells them),
:mod:`~kubegpu.placement.policies` (this API), :mod:`~kubegpu.placement.command`
(``kubegpu topology``, the only module here that reads files and prints),
:mod:`~kubegpu.placement.names` (the policy names alone, for config validation).

The package imports its modules on first use of a name (PEP 562): a device plugin validates its
policy names at start and builds the solvers only at its first GetPreferredAllocation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubegpu.placement.errors import PlacementError
    from kubegpu.placement.matrix import link_matrix
    from kubegpu.placement.names import (
        BEST_EFFORT,
        DEFAULT_SHARED_POLICY,
        DEFAULT_WHOLE_GPU_POLICY,
        DISTRIBUTED,
        PACKED,
        POLICIES,
        SHARED_POLICIES,
        TOPOLOGY,
        WHOLE_GPU_POLICIES,
    )
    from kubegpu.placement.policies import pick, pick_shared, prepare
    from kubegpu.placement.shared import SharedDevice

#: Public name -> the module that defines it.
_HOME = {
    "PlacementError": "errors",
    "link_matrix": "matrix",
    "pick": "policies",
    "pick_shared": "policies",
    "prepare": "policies",
    "SharedDevice": "shared",
    **dict.fromkeys(
        (
            "BEST_EFFORT",
            "DEFAULT_SHARED_POLICY",
            "DEFAULT_WHOLE_GPU_POLICY",
            "DISTRIBUTED",
            "PACKED",
            "POLICIES",
            "SHARED_POLICIES",
            "TOPOLOGY",
            "WHOLE_GPU_POLICIES",
        ),
        "names",
    ),
}

__all__ = [
    "BEST_EFFORT",
    "DEFAULT_SHARED_POLICY",
    "DEFAULT_WHOLE_GPU_POLICY",
    "DISTRIBUTED",
    "PACKED",
    "POLICIES",
    "SHARED_POLICIES",
    "TOPOLOGY",
    "WHOLE_GPU_POLICIES",
    "PlacementError",
    "SharedDevice",
    "link_matrix",
    "pick",
    "pick_shared",
    "prepare",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later look-ups do not come back here
    return value
