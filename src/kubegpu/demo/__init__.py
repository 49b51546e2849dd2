"""The demo and its harness: a simulated GPU node made of real kubegpu processes.

:mod:`.localnode` starts, restarts and stops ``kubegpu kubelet``, ``kubegpu plugin``
and ``kubegpu exporter`` as separate processes wired together in a temporary
directory (the demo, the benchmarks and the end-to-end tests share it);
:mod:`.command` is ``kubegpu demo``, the node story told with it, and
:mod:`.cluster` is ``kubegpu demo cluster``, the scheduler → node chain on an
API server. Composes the
components from outside, through their command lines and public interfaces only:
no component imports this package.
"""
