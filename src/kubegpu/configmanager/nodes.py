"""One node's label through the Kubernetes API (lightkube): its value now and each time it changes.

Reads the Node, then watches it from that resourceVersion with a field selector on its name; a watch that ends or
fails (410 Gone, a restarted API server) starts again from a fresh read after ``retry`` seconds. Must not choose
or switch configs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node

log = logging.getLogger(__name__)


def _label(node: Node, label: str) -> str | None:
    labels = (node.metadata.labels if node.metadata else None) or {}
    return labels.get(label)


async def label_values(
    client: AsyncClient, node_name: str, label: str, retry: float = 1.0
) -> AsyncIterator[str | None]:
    """Yield ``label``'s value on node ``node_name`` (None when unset) at start and after every change."""
    unset = object()
    last: object = unset
    while True:
        try:
            node = await client.get(Node, name=node_name)
            value = _label(node, label)
            if value != last:
                last = value
                yield value
            version = node.metadata.resourceVersion if node.metadata else None
            async for kind, obj in client.watch(Node, fields={"metadata.name": node_name}, resource_version=version):
                if kind == "DELETED":
                    continue
                value = _label(obj, label)
                if value != last:
                    last = value
                    yield value
        except ApiError as exc:
            log.warning(
                "node read failed, retrying", extra={"node": node_name, "code": exc.status.code, "error": str(exc)}
            )
        except (TimeoutError, OSError) as exc:
            log.warning("API server unreachable, retrying", extra={"node": node_name, "error": str(exc)})
        except Exception as exc:  # a daemon never dies on what the API answers
            log.warning("node watch failed, retrying", extra={"node": node_name, "error": repr(exc)})
        await asyncio.sleep(retry)
