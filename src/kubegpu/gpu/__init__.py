"""The hardware model and its backends.

``model`` describes machines, GPUs, MIG devices and topology; ``profiles``
loads shipped simulated machines; ``backend`` is the interface every backend
implements (discovery, health events, telemetry); ``simulated`` and ``nvml``
are the two implementations; ``faults`` is the journal through which faults
reach simulated machines. Must not import anything else of kubegpu.
"""
