"""Registering a resource with the kubelet: one ``v1beta1.Registration/Register`` call on kubelet.sock.

Owns building the RegisterRequest (version v1beta1, the socket's file name as
endpoint, the resource name, our options) and turning the outcome into
:class:`~.errors.KubeletUnavailable` (nobody there: retry soon) or
:class:`~.errors.RegistrationRejected` (the kubelet said no: retry later).
Must not serve anything or decide when to retry.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.errors import KubeletUnavailable, RegistrationRejected

log = logging.getLogger(__name__)

#: Deadline of one Register call. The kubelet dials us (up to 10 s) and asks our options inside it.
REGISTER_TIMEOUT_S = 15.0


def request(resource_name: str, endpoint: str, options: api_pb2.DevicePluginOptions) -> api_pb2.RegisterRequest:
    """The RegisterRequest for ``resource_name`` served on socket file ``endpoint``."""
    return api_pb2.RegisterRequest(
        version=constants.VERSION, endpoint=endpoint, resource_name=resource_name, options=options
    )


async def register(
    kubelet_socket: Path,
    resource_name: str,
    endpoint: str,
    options: api_pb2.DevicePluginOptions,
    deadline_s: float = REGISTER_TIMEOUT_S,
) -> None:
    """Call ``Register`` on ``kubelet_socket``; returns when the kubelet accepted us.

    Raises :class:`KubeletUnavailable` when kubelet.sock is missing or does not
    answer, :class:`RegistrationRejected` when the kubelet returns an error.
    """
    async with grpc.aio.insecure_channel(constants.unix_target(kubelet_socket)) as channel:
        stub = api_pb2_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
        try:
            await stub.Register(request(resource_name, endpoint, options), timeout=deadline_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNAVAILABLE:
                raise KubeletUnavailable(f"{kubelet_socket}: kubelet does not answer: {exc.details()}") from exc
            raise RegistrationRejected(
                f"kubelet rejected {resource_name} ({endpoint}): {exc.code().name}: {exc.details()}"
            ) from exc
