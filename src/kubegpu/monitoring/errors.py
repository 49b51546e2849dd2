"""Errors of the exporter, named by cause.

Owns the base :class:`MonitoringError` every error of :mod:`kubegpu.monitoring`
derives from; the errors themselves live beside what raises them
(``counters.CountersError``: a counters file that cannot be used,
``podresources.PodResourcesUnavailable``: the kubelet's pod-resources ``List``
failed). Must not log, retry or do I/O.
"""

from __future__ import annotations


class MonitoringError(Exception):
    """Base of every error raised by :mod:`kubegpu.monitoring`."""
