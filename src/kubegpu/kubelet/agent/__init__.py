"""The node agent: the kubelet emulator playing a Kubernetes Node on an API server.

``config`` (flags), ``nodeobject``, ``lease`` and ``podstatus`` are pure
translations between the emulator's state and API objects; ``nodesync``,
``podsync`` and ``agent`` are the only modules that talk to the API (they alone
import lightkube).
"""
