"""The running plugin: gRPC servers, registration, supervisor, kubelet watcher, health monitor, metrics.

Everything with a socket, a task or a signal handler: :mod:`.server` (one
DevicePlugin server per resource), :mod:`.registration` (the kubelet's
Registration client), :mod:`.supervisor` (start, restart on a new kubelet
socket or SIGHUP, stop), :mod:`.watcher` (kubelet.sock), :mod:`.monitor`
(backend health events in, device health out), :mod:`.metrics` (the plugin's
Prometheus series), :mod:`.host` (what the plugin looks at on its host) and
:mod:`.command` (``kubegpu plugin``). The only part of the device plugin that
imports ``grpc``; decisions are delegated to :mod:`kubegpu.deviceplugin.rm`.
"""
