"""``kubegpu doctor``: node checks, then (with a kubeconfig) cluster checks; a line each, or ``--json``.

Owns the flags, the order and the exit codes: 0 when every check passes, 1 when one fails, 2 on bad input (a
flag, an unknown machine profile, an unreadable kubeconfig), one line naming it. Must not implement checks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from kubegpu.api import constants
from kubegpu.doctor import facts, report
from kubegpu.doctor.report import Check


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu doctor",
        description="Check a GPU node (kubelet, device plugin, NVML, driver and CUDA, device nodes, CDI, container "
        "runtime, GPU health) and, with a kubeconfig, the cluster (GPU nodes, plugin pods, stuck GPU pods, the "
        "scheduler's Lease). Each check prints what it saw and the fix; exit 0 when all pass, 1 otherwise.",
    )
    p.add_argument("--json", action="store_true", help='print {"checks": [{"name", "ok", "detail", "fix"}]}')
    node = p.add_argument_group("node checks")
    node.add_argument("--no-node", action="store_true", help="skip the node checks (run from outside the cluster)")
    node.add_argument(
        "--socket-dir",
        type=Path,
        default=Path(constants.DEVICE_PLUGIN_PATH),
        help="the kubelet's device-plugin directory (default %(default)s)",
    )
    node.add_argument("--machine", help="a simulated machine profile instead of NVML [env KUBEGPU_MACHINE]")
    node.add_argument("--fault-file", type=Path, help="the simulated machine's fault journal (last XIDs)")
    node.add_argument("--driver-root", default=os.environ.get("NVIDIA_DRIVER_ROOT", "/"), help="host driver root")
    node.add_argument("--container-driver-root", default="/driver-root", help="driver root mounted in this container")
    node.add_argument("--dev-root", type=Path, default=Path("/"), help="root of /dev/nvidia* (default /)")
    node.add_argument("--cuda-version", metavar="X.Y", help="the CUDA version an image needs")
    node.add_argument("--image", help="an image whose tag names its CUDA version (nvidia/cuda:12.4.1-base-…)")
    node.add_argument(
        "--device-list-strategy",
        default=os.environ.get("DEVICE_LIST_STRATEGY", "envvar"),
        help="the plugin's strategy; a cdi-* one adds the CDI spec check [env DEVICE_LIST_STRATEGY]",
    )
    node.add_argument("--cdi-spec-dir", type=Path, default=Path(os.environ.get("CDI_SPEC_DIR", "/var/run/cdi")))
    node.add_argument(
        "--runtime-config",
        type=Path,
        action="append",
        help="containerd/CRI-O config file or drop-in directory (repeatable; default /etc/containerd/config.toml, "
        "/etc/containerd/conf.d, /etc/crio/crio.conf, /etc/crio/crio.conf.d)",
    )
    cluster = p.add_argument_group("cluster checks (with a kubeconfig)")
    cluster.add_argument("--kubeconfig", help="kubeconfig file [env KUBECONFIG]; without one, no cluster checks")
    cluster.add_argument(
        "--pod", metavar="NAMESPACE/NAME", help="check the CUDA this pod needs (its CUDA_VERSION env or image tag)"
    )
    cluster.add_argument("--scheduler-namespace", default="kube-system", help="namespace of the scheduler's Lease")
    cluster.add_argument("--scheduler-lease", default="kubegpu-scheduler", help="name of the scheduler's Lease")
    return p


def _error(message: str) -> int:
    print(f"kubegpu doctor: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from kubegpu import kubeconfig
    from kubegpu.doctor import node

    machine = args.machine or os.environ.get("KUBEGPU_MACHINE") or None
    if args.cuda_version:
        try:
            facts.parse_version(args.cuda_version)
        except ValueError as exc:
            return _error(f"--cuda-version: {exc}")
    if machine:
        from kubegpu.gpu import errors, profiles

        try:
            profiles.load(machine)
        except errors.ProfileError as exc:
            return _error(f"--machine: {exc}")
    kubeconfig_path = args.kubeconfig or os.environ.get("KUBECONFIG") or None
    client = None
    if kubeconfig_path:
        try:
            client = kubeconfig.client(kubeconfig_path)
        except kubeconfig.KubeconfigError as exc:
            return _error(str(exc))
    cuda_version, image, cuda_source = args.cuda_version, args.image, None
    if args.pod:
        namespace, slash, name = args.pod.partition("/")
        if not slash or not namespace or not name:
            return _error(f"--pod: expected NAMESPACE/NAME, got {args.pod!r}")
        if client is None:
            return _error("--pod needs a kubeconfig (--kubeconfig or $KUBECONFIG)")
        try:
            cuda_version, image = asyncio.run(_pod_cuda(client, namespace, name))
        except LookupError as exc:
            return _error(f"--pod {args.pod}: {exc}")
        if cuda_version:
            try:
                facts.parse_version(cuda_version)
            except ValueError as exc:
                return _error(f"--pod {args.pod}: CUDA_VERSION: {exc}")
        cuda_source = f"pod {args.pod}"
        client = kubeconfig.client(kubeconfig_path)  # the first one's connections closed with its event loop
    checks: list[Check] = []
    if not args.no_node:
        defaults = node.NodeOptions()
        checks += node.run(
            node.NodeOptions(
                socket_dir=args.socket_dir,
                machine=machine,
                fault_file=args.fault_file,
                driver_root=args.driver_root,
                container_driver_root=args.container_driver_root,
                dev_root=args.dev_root,
                cuda_version=cuda_version,
                image=image,
                cuda_source=cuda_source,
                device_list_strategy=tuple(s.strip() for s in args.device_list_strategy.split(",") if s.strip()),
                cdi_spec_dir=args.cdi_spec_dir,
                runtime_configs=tuple(args.runtime_config) if args.runtime_config else defaults.runtime_configs,
            )
        )
    if client is not None:
        from kubegpu.doctor import cluster

        opts = cluster.ClusterOptions(
            scheduler_namespace=args.scheduler_namespace, scheduler_lease=args.scheduler_lease
        )
        checks += asyncio.run(_cluster(client, opts))
    if not checks:
        return _error("nothing to check: --no-node without a kubeconfig")
    print(report.as_json(checks) if args.json else report.text(checks))
    return 0 if all(c.ok for c in checks) else 1


async def _pod_cuda(client: object, namespace: str, name: str) -> tuple[str | None, str | None]:
    from lightkube import ApiError, AsyncClient

    from kubegpu.doctor import cluster

    assert isinstance(client, AsyncClient)
    try:
        return await cluster.pod_cuda(client, namespace, name)
    except ApiError as exc:
        raise LookupError(str(exc)) from None
    except Exception as exc:
        raise LookupError(f"cannot read the pod: {exc}") from None
    finally:
        await client.close()


async def _cluster(client: object, opts: object) -> list[Check]:
    from lightkube import AsyncClient

    from kubegpu.doctor import cluster

    assert isinstance(client, AsyncClient) and isinstance(opts, cluster.ClusterOptions)
    try:
        return await cluster.run(client, opts)
    finally:
        await client.close()
