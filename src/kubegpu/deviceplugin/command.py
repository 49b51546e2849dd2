"""``kubegpu plugin``: the device plugin daemon's entry point.

Owns turning the command line into a running :class:`~.supervisor.Supervisor`
and the exit code: 2 for bad input (an unknown machine profile, a bad flag),
1 when the machine cannot be discovered, 0 after a clean stop. Must not
contain plugin logic.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    from kubegpu.deviceplugin import options as options_mod
    from kubegpu.deviceplugin.supervisor import Supervisor
    from kubegpu.gpu import errors, profiles

    options = options_mod.parse(argv)
    if options.machine is not None:
        try:
            profiles.load(options.machine)
        except errors.ProfileError as exc:
            options_mod.parser().error(f"--machine {options.machine!r}: {exc}")
    log.info(
        "starting",
        extra={
            "kubelet_socket": str(options.kubelet_socket),
            "machine": options.machine or "nvml",
            "quiet_period_s": options.quiet_period_s,
        },
    )
    return asyncio.run(Supervisor(options).run())
