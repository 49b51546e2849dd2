"""The settings Allocate responses depend on, taken from the effective config once at start.

Owns :class:`ResponseOptions`, apart from :mod:`.responses` so that a plugin's start can build
them (and check its IMEX channels) without loading the response builder, which the first
Allocate loads. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from kubegpu.deviceplugin.config.flags import MPS_CONTAINER_ROOT

if TYPE_CHECKING:
    from kubegpu.deviceplugin.config.effective import Config

#: Extra CDI classes and the env var each sets when enabled.
FEATURES = (("gdrcopy", "NVIDIA_GDRCOPY"), ("gds", "NVIDIA_GDS"), ("mofed", "NVIDIA_MOFED"))
IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"


def imex_channel_node(channel: int) -> str:
    """The device node of IMEX channel ``channel``."""
    return f"{IMEX_CHANNEL_DIR}/channel{channel}"


@dataclass(frozen=True)
class ResponseOptions:
    """The settings response building depends on (from :class:`~kubegpu.deviceplugin.config.effective.Config`).

    ``imex_channels`` are the configured channels whose device nodes exist (the runtime checks at
    start); ``cdi_features`` the enabled gdrcopy/gds/mofed classes whose CDI spec was not empty.
    """

    device_list_strategies: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    pass_device_specs: bool = False
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    dev_root: str = "/"
    gdrcopy: bool = False
    gds: bool = False
    mofed: bool = False
    mps_root: str = ""
    #: Where client containers get the MPS root's pipe directories (NVIDIA: ``/mps``, where its daemon runs them).
    mps_container_root: str = MPS_CONTAINER_ROOT
    #: MPS is the node's sharing strategy: fractional (milli) containers get the MPS client limits too.
    mps: bool = False
    imex_channels: tuple[int, ...] = ()
    cdi_features: tuple[str, ...] = ()

    @classmethod
    def from_config(
        cls, config: Config, *, imex_channels: Sequence[int] | None = None, cdi_features: Sequence[str] | None = None
    ) -> ResponseOptions:
        """Options from the effective config; ``imex_channels`` defaults to every configured channel."""
        flags = config.flags
        return cls(
            device_list_strategies=tuple(flags.plugin.device_list_strategy),
            device_id_strategy=flags.plugin.device_id_strategy,
            pass_device_specs=flags.plugin.pass_device_specs,
            cdi_annotation_prefix=flags.plugin.cdi_annotation_prefix,
            dev_root=flags.nvidia_dev_root,
            gdrcopy=flags.gdrcopy_enabled,
            gds=flags.gds_enabled,
            mofed=flags.mofed_enabled,
            mps_root=flags.mps_root,
            mps_container_root=config.options.mps_container_root,
            mps=config.sharing_strategy == "mps",
            imex_channels=tuple(config.imex.channel_ids if imex_channels is None else imex_channels),
            cdi_features=tuple(cdi_features or ()),
        )

    @cached_property
    def any_cdi(self) -> bool:
        return any(s.startswith("cdi-") for s in self.device_list_strategies)

    @cached_property
    def only_cdi(self) -> bool:
        return self.any_cdi and all(s.startswith("cdi-") for s in self.device_list_strategies)

    def feature_enabled(self, feature: str) -> bool:
        return bool(getattr(self, feature))
