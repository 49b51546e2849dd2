"""Constants of the kubelet's device-plugin and pod-resources APIs.

Owns the values every peer must agree on (version strings, default paths,
health strings, timeouts, the checkpoint file name). Pure data; no I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

#: The device-plugin API version our plugin speaks and our emulator accepts.
VERSION: Final = "v1beta1"
SUPPORTED_VERSIONS: Final = ("v1beta1",)

#: Default directory of device-plugin sockets on a node (trailing slash as upstream).
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
KUBELET_SOCKET_NAME: Final = "kubelet.sock"
KUBELET_SOCKET: Final = DEVICE_PLUGIN_PATH + KUBELET_SOCKET_NAME

#: The kubelet's device-manager checkpoint, beside kubelet.sock.
CHECKPOINT_NAME: Final = "kubelet_internal_checkpoint"

#: Default socket of the kubelet's pod-resources API.
POD_RESOURCES_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"

#: The only health strings; anything other than HEALTHY counts as unhealthy.
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"

#: The kubelet's timeout for PreStartContainer.
PRE_START_CONTAINER_TIMEOUT_S: Final = 30.0
#: How long the kubelet waits for a stopped endpoint before removing its resource.
ENDPOINT_STOP_GRACE_PERIOD_S: Final = 300.0
#: The kubelet's blocking dial timeout towards a plugin socket.
DIAL_TIMEOUT_S: Final = 10.0


def unix_target(path: str | Path) -> str:
    """The gRPC target string for a unix socket at ``path`` (made absolute)."""
    return "unix://" + str(Path(path).absolute())
