"""Where a kubegpu command finds its cluster: ``--kubeconfig FILE``, else ``$KUBECONFIG``, else the in-cluster
service account (then ``~/.kube/config``), as every Kubernetes tool does; and the lightkube client for it.

Must not make requests: callers own what they ask the API.
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ConfigError


class KubeconfigError(ValueError):
    """The kubeconfig cannot be read; the message names the file or what was looked at."""


def load(path: str | None) -> KubeConfig:
    """The kubeconfig of ``path`` or, without one, of the environment.

    Its current context is resolved here, so a file without a usable one fails now (one line naming the file),
    not at the first request.
    """
    try:
        if path:
            if not Path(path).is_file():
                raise KubeconfigError(f"--kubeconfig {path}: no such file")
            config = KubeConfig.from_file(path)
        else:
            config = KubeConfig.from_env()
        config.get()
    except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError) as exc:
        if isinstance(exc, KubeconfigError):
            raise
        where = path or "$KUBECONFIG, the in-cluster service account or ~/.kube/config"
        problem = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, KeyError | TypeError | AttributeError):
            problem = f"not a kubeconfig (missing or malformed {problem})"
        raise KubeconfigError(f"cannot load a kubeconfig from {where}: {problem}") from exc
    return config


def client(path: str | None, namespace: str | None = None) -> AsyncClient:
    """An async lightkube client for the cluster of :func:`load`; its HTTP library logs no line per request."""
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    return AsyncClient(config=load(path), namespace=namespace)
