"""The kubelet emulator: the real kubelet's device manager, without a cluster.

Owns the Registration server, plugin endpoints, device bookkeeping, the
checkpoint, pod admission, the pod-resources server and the control API.
Imports only :mod:`kubegpu.api`: it treats plugins as black boxes, like the
real kubelet.
"""
