"""The chart rendered and linted by the real Helm (helm-sdkpy: Helm v4 as a library); deploy/static/ written from it.

helm-sdkpy has no client-only render, so :func:`render` runs Helm's real ``install`` against :class:`RenderSink`,
the few API endpoints an install needs: the server version (which Helm's ``.Capabilities.KubeVersion`` reads),
discovery for the kinds the chart makes, "not found" for every object and the creation of each; the release Helm
returns holds the rendered manifest. The sink keeps nothing and checks nothing: it is a render target, not an API
server (the tests of what talks to the API use the in-process server of ``tests/kubeapi``).

``python -m tests.deploy.helmrender`` rewrites ``deploy/static/`` from the chart's defaults; ``--check`` says
whether they drifted. Must not hold assertions about what the chart renders: that is the tests' job.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "kubegpu"
STATIC = REPO / "deploy" / "static"
#: What `kubectl apply -f deploy/static/` users get: the chart's defaults, released as "kubegpu" in kube-system.
STATIC_RELEASE = "kubegpu"
STATIC_NAMESPACE = "kube-system"

#: (group, version, kind, plural, namespaced) of every kind the chart can make, for Helm's discovery.
KINDS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("", "v1", "ConfigMap", "configmaps", True),
    ("", "v1", "Secret", "secrets", True),
    ("", "v1", "Service", "services", True),
    ("", "v1", "ServiceAccount", "serviceaccounts", True),
    ("apps", "v1", "DaemonSet", "daemonsets", True),
    ("apps", "v1", "Deployment", "deployments", True),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    ("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", True),
    ("monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", True),
)


class HelmUnavailable(RuntimeError):
    """helm-sdkpy is not installed (it needs ``pip install --ignore-requires-python helm-sdkpy`` on 3.11)."""


def _resource_list(group: str, version: str) -> dict[str, Any]:
    resources = [
        {
            "name": plural,
            "singularName": kind.lower(),
            "namespaced": namespaced,
            "kind": kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }
        for g, v, kind, plural, namespaced in KINDS
        if (g, v) == (group, version)
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}".lstrip("/"),
        "resources": resources,
    }


class _Handler(BaseHTTPRequestHandler):
    server: RenderSink

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the sink is not a server to watch
        return

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self) -> None:
        self._answer(
            404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
        )

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        groups = sorted({(g, v) for g, v, *_ in KINDS if g})
        if path == "/version":
            major, minor = self.server.kube_version.split(".")[:2]
            self._answer(
                200, {"major": major, "minor": minor, "gitVersion": f"v{major}.{minor}.0", "platform": "linux/amd64"}
            )
        elif path == "/api":
            self._answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/api/v1":
            self._answer(200, _resource_list("", "v1"))
        elif path == "/apis":
            self._answer(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": g,
                            "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                            "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                        }
                        for g, v in groups
                    ],
                },
            )
        elif path.startswith("/apis/") and path.count("/") == 3:
            _, _, group, version = path.split("/")
            self._answer(200, _resource_list(group, version))
        elif path.endswith("/secrets"):  # Helm's release history: none yet
            self._answer(200, {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []})
        else:
            self._not_found()

    def _created(self, code: int) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "json" in self.headers.get("Content-Type", ""):
            self._answer(code, json.loads(body))
        else:  # Helm stores its release Secret as protobuf; a Secret with the name back is all it reads
            self._answer(
                code, {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": self.path.rsplit("/", 1)[-1]}}
            )

    def do_POST(self) -> None:
        self._created(201)

    def do_PUT(self) -> None:
        self._created(200)


class RenderSink(ThreadingHTTPServer):
    """The endpoints Helm's install needs, on loopback, answering as Kubernetes ``kube_version`` (``1.29``)."""

    daemon_threads = True

    def __init__(self, kube_version: str = "1.29") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.kube_version = kube_version

    def kubeconfig(self) -> str:
        host, port = self.server_address[:2]
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sink", "cluster": {"server": f"http://{host!s}:{port}"}}],
                "users": [{"name": "sink", "user": {"token": "render"}}],
                "contexts": [{"name": "sink", "context": {"cluster": "sink", "user": "sink"}}],
                "current-context": "sink",
            }
        )


@contextmanager
def sink(kube_version: str = "1.29") -> Iterator[RenderSink]:
    server = RenderSink(kube_version)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _helm() -> Any:
    try:
        import helm_sdkpy
    except ImportError as exc:  # pragma: no cover - CI installs it
        raise HelmUnavailable(str(exc)) from exc
    return helm_sdkpy


def render_release(
    values: dict[str, Any] | None = None,
    *,
    release: str = STATIC_RELEASE,
    namespace: str = STATIC_NAMESPACE,
    kube_version: str = "1.29",
    chart: Path = CHART,
) -> dict[str, Any]:
    """Helm's release (name, chart, config, ``manifest``, ``info.notes``) for ``values``; raises Helm's errors."""
    helm = _helm()
    with sink(kube_version) as server:
        config = helm.Configuration(namespace=namespace, kubeconfig=server.kubeconfig())
        result: dict[str, Any] = asyncio.run(
            helm.Install(config).run(release, str(chart), values=values or None, wait=False)
        )
        return result


def render(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Every object the chart makes for ``values``, in Helm's install order."""
    manifest = render_release(values, **kwargs)["manifest"]
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def lint(chart: Path = CHART) -> list[dict[str, Any]]:
    """Helm lint's messages (``Severity``: 1 info, 2 warning, 4 error; ``Path``; ``Err``)."""
    helm = _helm()
    config = helm.Configuration(namespace=STATIC_NAMESPACE)
    result: dict[str, Any] = asyncio.run(helm.Lint(config).run(str(chart)))
    return list(result.get("Messages") or [])


def static_files(objects: list[dict[str, Any]]) -> dict[str, str]:
    """deploy/static/'s files: one per component (the ``app.kubernetes.io/component`` label), objects in order."""
    files: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        component = "crds" if obj["kind"] == "CustomResourceDefinition" else labels.get("app.kubernetes.io/component")
        component = component or "cluster"
        files.setdefault(f"kubegpu-{component}.yaml", []).append(obj)
    header = (
        "# Rendered from deploy/helm/kubegpu with its default values (release kubegpu, namespace kube-system).\n"
        "# Do not edit: regenerate with `python -m tests.deploy.helmrender`; a test fails when this file drifts.\n"
    )
    return {
        name: header + yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True, width=120)
        for name, docs in files.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when deploy/static/ differs from the chart")
    args = parser.parse_args(argv)
    wanted = static_files(render())
    present = {p.name: p.read_text() for p in STATIC.glob("*.yaml")} if STATIC.is_dir() else {}
    if args.check:
        drifted = sorted(set(wanted) ^ set(present) | {n for n in wanted if present.get(n) != wanted[n]})
        for name in drifted:
            print(f"deploy/static/{name}: differs from the chart (python -m tests.deploy.helmrender)", file=sys.stderr)
        return 1 if drifted else 0
    STATIC.mkdir(parents=True, exist_ok=True)
    for name in set(present) - set(wanted):
        (STATIC / name).unlink()
    for name, text in wanted.items():
        (STATIC / name).write_text(text)
        print(f"wrote deploy/static/{name}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HELM_NAMESPACE", STATIC_NAMESPACE)
    sys.exit(main())
