"""The live scheduler: kubegpu's scheduling core driven by a Kubernetes API server.

Only this package talks to the Kubernetes API (through lightkube). Pure modules
(``resources``, ``objects``, ``filters``, ``cache``, ``scoring``, ``cycle``,
``queue``, ``gangs``, ``preemption``, ``config``, ``election``) translate API
objects into values and decide; I/O modules (``informers``, ``apiwrites``,
``leader``, ``serving``, ``scheduler``, ``command``) read and write the API.
"""
