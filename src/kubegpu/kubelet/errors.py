"""Errors of the kubelet emulator, named by cause.

Owns the exception types the emulator's parts raise and the client sees. The
message of an error that mirrors a kubelet error is the kubelet's text, word
for word, so plugin authors can grep real kubelet logs for it. Must not import
gRPC or do I/O: servers map these to status codes, the CLI to exit codes.
"""

from __future__ import annotations


class KubeletError(Exception):
    """Base of every error raised by :mod:`kubegpu.kubelet`."""


class RegistrationRejected(KubeletError):
    """A ``Register`` call failed; the message is what the kubelet returns (gRPC code UNKNOWN)."""


class AllocationError(KubeletError):
    """The device manager could not allocate a container's devices; the message is the kubelet's."""


class TopologyAffinityError(KubeletError):
    """The topology manager's policy rejected the pod (reason ``TopologyAffinityError``)."""

    def __init__(self) -> None:
        super().__init__("Resources cannot be allocated with Topology locality")


class ContainerStartError(KubeletError):
    """A container of an admitted pod could not start (``PreStartContainer`` failed, endpoint missing)."""


class PodManifestError(KubeletError, ValueError):
    """A pod manifest is not a valid Pod; the message names the field and the problem."""


class CheckpointError(KubeletError, ValueError):
    """A checkpoint file is corrupt or its checksum does not match."""


class PodStoreError(KubeletError, ValueError):
    """The emulator's pod store (``pods.json``) cannot be read; the message names the file and the problem."""


class KubeletUnavailable(KubeletError):
    """No emulator answers on the control socket (not running, wrong ``--socket-dir``)."""


class ControlError(KubeletError):
    """The emulator answered a control request with an error.

    ``reason`` is machine-readable (``UnexpectedAdmissionError``, ``TopologyAffinityError``,
    ``CreateContainerConfigError``, ``NotFound``, ``AlreadyExists``, ``BadRequest``),
    ``detail`` carries the rest of the answer (for a container start error: the admitted pod).
    """

    def __init__(self, reason: str, message: str, detail: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail or {}

    @property
    def is_bad_input(self) -> bool:
        """True when the request itself was wrong (the CLI exits 2), not the node's state."""
        return self.reason == "BadRequest"
