"""How NVIDIA's plugin spells device IDs and resource names: the one place that knows ``::``, ``.shared`` and ``mig-``.

Owns the annotated device ID (:class:`AnnotatedID`: ``<uuid>`` or, for a replica of
a shared device, ``<uuid>::<n>``, NVIDIA's ``AnnotatedID``), resource names (the
``nvidia.com`` prefix and its normalisation with NVIDIA's error texts, the
``<name>.shared`` rename of shared resources, ``nvidia.com/mig-<profile>`` for MIG
profiles under the mixed strategy) and the plugin socket of a resource
(``nvidia-<name part>.sock``), and kubegpu's milli units ``<uuid>::m<k>`` of
``kubegpu.io/gpu-milli``. Pure string rules: which devices a resource has is
:mod:`kubegpu.deviceplugin.rm.resource_map`'s. Imports nothing, so the config, the
resource manager and the exporter's pod attribution can all use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Separator between a device's UUID and its replica number (NVIDIA's AnnotatedID).
REPLICA_SEPARATOR = "::"
#: Prefix added to resource names given without one (NVIDIA reads ``RESOURCE_PREFIX``; we fix it).
RESOURCE_PREFIX = "nvidia.com"
#: The whole-GPU resource.
GPU_RESOURCE = f"{RESOURCE_PREFIX}/gpu"
#: Suffix of a shared resource's default rename (``renameByDefault``).
SHARED_SUFFIX = ".shared"
#: The whole-GPU resource's default shared rename.
SHARED_GPU_RESOURCE = GPU_RESOURCE + SHARED_SUFFIX
#: Name part of a mixed-strategy MIG resource before its profile.
MIG_PREFIX = "mig-"
#: Resource names of mixed-strategy MIG devices start with this.
MIG_RESOURCE_PREFIX = f"{RESOURCE_PREFIX}/{MIG_PREFIX}"
MAX_RESOURCE_NAME_LENGTH = 63
#: kubegpu's fractional-GPU resource: one device per thousandth of a GPU (``--gpu-milli``).
MILLI_RESOURCE = "kubegpu.io/gpu-milli"
#: Units of ``MILLI_RESOURCE`` one GPU is advertised as.
MILLI_PER_GPU = 1000
#: What follows the replica separator in a milli unit's ID, before its number (``<uuid>::m<k>``).
MILLI_MARK = "m"

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


class AnnotatedID(str):
    """A device ID as the kubelet sees it: a GPU or MIG UUID, or ``<uuid>::<n>`` for replica ``n`` of it.

    Anything after the first ``::`` is the annotation; a non-numeric one has no replica number.
    """

    __slots__ = ()

    @classmethod
    def replica_of(cls, device_id: str, replica: int) -> AnnotatedID:
        """The ID of replica ``replica`` of device ``device_id``."""
        return cls(f"{device_id}{REPLICA_SEPARATOR}{replica}")

    @property
    def physical(self) -> str:
        """The ID without its replica suffix: what the container runtime gets (``GPU-a`` for ``GPU-a::3``)."""
        return self.partition(REPLICA_SEPARATOR)[0]

    @property
    def replica(self) -> int | None:
        """The replica number, None for an unannotated ID (or a non-numeric annotation)."""
        _, sep, rest = self.partition(REPLICA_SEPARATOR)
        return int(rest) if sep and rest.isdigit() else None


def strip_replica(device_id: str) -> str:
    """``GPU-a::3`` → ``GPU-a``; an ID without a replica suffix is returned as is."""
    return AnnotatedID(device_id).physical


def replica_id(device_id: str, replica: int) -> str:
    """The ID of replica ``replica`` of device ``device_id``."""
    return AnnotatedID.replica_of(device_id, replica)


def milli_id(gpu_uuid: str, unit: int) -> str:
    """The ID of milli unit ``unit`` (0..999) of GPU ``gpu_uuid``: ``<uuid>::m<unit>``."""
    return f"{gpu_uuid}{REPLICA_SEPARATOR}{MILLI_MARK}{unit}"


def unique_physical_ids(device_ids: Iterable[str]) -> list[str]:
    """Replica suffixes stripped, duplicates dropped, first-seen order kept."""
    seen: dict[str, None] = {}
    for device_id in device_ids:
        seen.setdefault(strip_replica(device_id), None)
    return list(seen)


def resource_name(raw: str) -> str:
    """NVIDIA's resource-name normalisation: add ``nvidia.com/`` when missing, then check length and format.

    Raises ``ValueError`` with NVIDIA's texts (``fully-qualified resource name must be 63 characters or
    less: …``, ``incorrect format for resource name '…': […]``).
    """
    name = raw if raw.startswith(RESOURCE_PREFIX + "/") else f"{RESOURCE_PREFIX}/{raw}"
    if len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise ValueError(f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {name}")
    short = name.split("/", 1)[1]
    if len(short) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(short):
        raise ValueError(f"incorrect format for resource name '{name}': [{_DNS1123_MESSAGE}]")
    return name


def short_name(name: str) -> str:
    """The part of a resource name after the ``/`` (``nvidia.com/mig-1g.10gb`` -> ``mig-1g.10gb``)."""
    return name.split("/", 1)[1] if "/" in name else name


def shared_name(name: str) -> str:
    """The default rename of a shared resource (``renameByDefault``): ``nvidia.com/gpu`` -> ``…/gpu.shared``."""
    return name + SHARED_SUFFIX


def mig_resource_suffix(profile: str) -> str:
    """``1g.10gb+me`` -> ``mig-1g.10gb.me``: the default mixed-strategy resource (without ``nvidia.com/``)."""
    return MIG_PREFIX + profile.replace("+", ".")


def is_nvidia_gpu_resource(name: str) -> bool:
    """True for the names the plugin advertises GPUs under by default: ``nvidia.com/gpu``, its shared rename,
    and ``nvidia.com/mig-*``."""
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


def socket_name(resource_name: str) -> str:
    """``nvidia.com/gpu`` → ``nvidia-gpu.sock``; ``nvidia.com/mig-1g.10gb`` → ``nvidia-mig-1g.10gb.sock``."""
    return f"nvidia-{short_name(resource_name)}.sock"
