"""Errors of the device plugin, named by cause.

Owns :class:`DevicePluginError`, the base of every error the device plugin
raises, and the errors of its gRPC edge. Errors of one layer live beside what
raises them and derive from the base (``config.v1.ConfigError``,
``cdi.schema.CdiError``, ``rm.resource_map.ResourceMapError``,
``rm.mig_caps.MigCapsError``, ``rm.milli.ShareError``, ``gfd.labels.LabelError``, ``mps.control.MpsError``,
``plugin.host.HostError``, ``plugin.supervisor.StartupFailed``), so a command can
catch the base; ``tests/test_error_hierarchy.py`` holds every package to that. Which gRPC status code each
becomes when it crosses a DevicePlugin RPC is decided in one place,
:func:`kubegpu.deviceplugin.plugin.server._answer`. Supervisor
decisions (retry soon, retry later, give up) are made by the supervisor from
these types; this module must not log, retry or do I/O.
"""

from __future__ import annotations


class DevicePluginError(Exception):
    """Base of every error raised by :mod:`kubegpu.deviceplugin`."""


class InvalidRequest(DevicePluginError):
    """A kubelet request the plugin cannot honour (unknown device, impossible size).

    Surfaces as gRPC ``INVALID_ARGUMENT`` with the message as details; the
    daemon keeps serving.
    """


class KubeletUnavailable(DevicePluginError):
    """kubelet.sock is missing or nobody answers on it: wait for the kubelet and try again soon."""


class RegistrationRejected(DevicePluginError):
    """The kubelet answered ``Register`` with an error (bad version, bad resource name, cannot dial us)."""


class PluginServeError(DevicePluginError):
    """Our own gRPC server could not be started or did not answer on its socket."""


class MpsNotReady(DevicePluginError):
    """An MPS-shared resource's control daemon has not signalled readiness yet: wait and try again soon."""
