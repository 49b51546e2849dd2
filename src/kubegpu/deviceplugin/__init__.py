"""The node agent: NVIDIA k8s-device-plugin compatible device plugin.

Owns config (flags, env, file), resource naming (whole GPUs, MIG, sharing
replicas), Allocate responses, health policy, CDI specs, node labels, the
DevicePlugin gRPC servers, registration with the kubelet and the supervisor
loop. Imports only :mod:`kubegpu.gpu`, :mod:`kubegpu.placement` and
:mod:`kubegpu.api`; never the kubelet emulator or monitoring.
"""
