"""What the plugin looks at on its own host: device nodes, driver libraries, IMEX channels.

Owns where the plugin *looks*, as NVIDIA's plugin does from inside its
container: under the container driver root (``--container-driver-root``,
default ``/driver-root``) when its ``dev`` directory is mounted there, else at
``/`` — and, for a simulated machine without such a mount, nowhere: every
control node of a simulated machine exists. What the plugin *writes* into
Allocate responses and CDI specs are host paths under ``--driver-root`` and
``--dev-root``; the pure modules (:mod:`.responses`, :mod:`.cdi`) map those.
Must not build responses or specs, and must not write anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.rm import response_options
from kubegpu.gpu.model import Machine

if TYPE_CHECKING:
    from kubegpu.deviceplugin.cdi import generate

log = logging.getLogger(__name__)


class HostError(DevicePluginError):
    """Something the config requires is missing on the host (a required IMEX channel)."""


@dataclass(frozen=True)
class HostView:
    """Where device nodes and driver files are looked for.

    ``dev_root``: the root under which ``/dev/...`` is checked; None for a simulated machine (every node exists).
    ``driver_root``: the root under which driver libraries are looked for; None: none are (simulated).
    """

    dev_root: Path | None
    driver_root: Path | None

    @classmethod
    def of(cls, config: Config, simulated: bool) -> HostView:
        """NVIDIA's rule: the container driver root is also the dev root for discovery when ``<it>/dev`` exists."""
        mounted = Path(config.flags.plugin.container_driver_root)
        if (mounted / "dev").is_dir():
            return cls(dev_root=mounted, driver_root=mounted)
        if simulated:
            return cls(dev_root=None, driver_root=None)
        driver = mounted if mounted.is_dir() else Path(config.flags.nvidia_driver_root)
        return cls(dev_root=Path("/"), driver_root=driver)

    def exists(self, path: str) -> bool:
        """Whether device node ``path`` (``/dev/nvidiactl``) exists where the plugin runs."""
        if self.dev_root is None:
            return True
        return (self.dev_root / path.lstrip("/")).exists()

    def cdi_host_files(self, machine: Machine) -> generate.HostFiles:
        """Control nodes, driver libraries and feature nodes for the CDI specs."""
        from kubegpu.deviceplugin.cdi import generate, hostfiles

        if self.dev_root is None or self.driver_root is None:
            return generate.HostFiles()
        return hostfiles.discover(self.driver_root, self.dev_root, machine.driver_version)


def imex_channels(channel_ids: Sequence[int], required: bool, view: HostView) -> tuple[int, ...]:
    """The configured IMEX channels whose device node exists.

    A missing channel is an error when ``required`` (NVIDIA refuses to start), else a warning and skipped.
    """
    present = []
    for channel in channel_ids:
        node = response_options.imex_channel_node(channel)
        if view.exists(node):
            present.append(channel)
        elif required:
            raise HostError(f"IMEX channel {channel} is required but {node} does not exist")
        else:
            log.warning("IMEX channel missing, skipped", extra={"channel": channel, "node": node})
    return tuple(present)
