"""Placement inside one node: which GPUs (or replicas, or MIG devices) to give a request.

Pure policies over a node's topology (best-effort as go-gpuallocator, our
topology-aware policy, packed and distributed for replicas), used by the
device plugin's GetPreferredAllocation and by the scheduler. Imports only
:mod:`kubegpu.gpu`; no I/O, no gRPC.
"""
