"""GPU-aware scheduling: the core (cluster state, filters, scorers, policies,
gangs, preemption), the trace-driven simulator and the live adapter.

The core imports no gRPC, no :mod:`kubegpu.api` and no Kubernetes client.
"""
