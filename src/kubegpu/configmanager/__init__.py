"""NVIDIA's config-manager: choose the device plugin's config from a node label and switch it (SIGHUP) on change.

``selection`` (pure: which named config a label value picks), ``switch`` (I/O: the config link and the signal),
``nodes`` (the node's label through the Kubernetes API, lightkube) and ``command`` (flags and the loop).
"""
