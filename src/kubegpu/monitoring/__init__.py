"""The exporter: dcgm-exporter compatible metrics with pod attribution.

Owns the DCGM field table, collectors over backend telemetry, pod attribution
through the pod-resources API and the HTTP endpoint. Imports only
:mod:`kubegpu.gpu` and :mod:`kubegpu.api`; never the device plugin.
"""
