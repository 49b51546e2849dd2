"""The doctor's one gRPC client: asks a plugin socket for its options (a serving plugin, or a dead socket).

It owns only that call; the checks that interpret its outcome live in ``doctor.node``.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc


async def plugin_options(path: Path, timeout_s: float = 3.0) -> None:
    """Call ``GetDevicePluginOptions`` on the plugin socket at ``path``; raises what gRPC raises."""
    async with grpc.aio.insecure_channel(constants.unix_target(path)) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=timeout_s)
