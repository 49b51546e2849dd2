"""The placement policies' names and defaults, with nothing else.

Owns the strings ``--allocation-policy`` and the config accept, so that config
validation can name and check a policy without building the policies (the
device plugin's start reads these, and meets the solvers only at its first
GetPreferredAllocation). Must import nothing.
"""

from __future__ import annotations

BEST_EFFORT = "best-effort"
TOPOLOGY = "topology"
DISTRIBUTED = "distributed"
PACKED = "packed"

#: Policies for whole GPUs, the default first.
WHOLE_GPU_POLICIES = (TOPOLOGY, BEST_EFFORT)
#: Policies for replicas and MIG devices, the default first (NVIDIA's default too).
SHARED_POLICIES = (DISTRIBUTED, PACKED)
POLICIES = WHOLE_GPU_POLICIES + SHARED_POLICIES
DEFAULT_WHOLE_GPU_POLICY = TOPOLOGY
DEFAULT_SHARED_POLICY = DISTRIBUTED
