"""Doctor's node checks: what a GPU node needs, in the order a pod meets it, each read from the node itself.

The kubelet's device-plugin directory and ``kubelet.sock``; our plugin's sockets (each answering
``GetDevicePluginOptions``) and its registration (the kubelet's checkpoint, which lists each registered resource's
healthy devices); NVML, the driver and CUDA versions and whether an image's CUDA runs on them; the device nodes; the
CDI spec when a CDI strategy is on; the container runtime's config; unhealthy GPUs and their last XID. Must not
talk to the Kubernetes API (``cluster`` does).
"""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubegpu.api import constants
from kubegpu.doctor import facts, probe
from kubegpu.doctor.report import Check, failed, passed
from kubegpu.gpu.model import Machine

PLUGIN_FIX = (
    "start the device plugin: kubectl -n kube-system get pods -l app.kubernetes.io/component=device-plugin -o wide "
    "(helm install kubegpu deploy/helm/kubegpu, or kubectl apply -f deploy/static/), and read its log"
)


@dataclass(frozen=True)
class NodeOptions:
    socket_dir: Path = Path(constants.DEVICE_PLUGIN_PATH)
    machine: str | None = None
    fault_file: Path | None = None
    driver_root: str = "/"
    container_driver_root: str = "/driver-root"
    dev_root: Path = Path("/")
    cuda_version: str | None = None
    image: str | None = None
    cuda_source: str | None = None  # where --cuda-version / --image came from, when not the command line
    device_list_strategy: tuple[str, ...] = ("envvar",)
    cdi_spec_dir: Path = Path("/var/run/cdi")
    runtime_configs: tuple[Path, ...] = field(
        default_factory=lambda: (
            Path("/etc/containerd/config.toml"),
            Path("/etc/containerd/conf.d"),
            Path("/etc/crio/crio.conf"),
            Path("/etc/crio/crio.conf.d"),
        )
    )


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except (OSError, ValueError):  # ValueError: a NUL byte in the path, which no file can have
        return False


def _connects(path: Path) -> str | None:
    """None when a unix stream connection to ``path`` succeeds, else the error."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(str(path))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def device_plugin_dir(opts: NodeOptions) -> Check:
    name = "device-plugin directory"
    if opts.socket_dir.is_dir():
        return passed(name, f"{opts.socket_dir} exists")
    return failed(
        name,
        f"{opts.socket_dir} does not exist",
        "not a kubelet node, or the kubelet has another --root-dir: pass --socket-dir <root-dir>/device-plugins",
    )


def kubelet_socket(opts: NodeOptions) -> Check:
    name = "kubelet.sock"
    path = opts.socket_dir / constants.KUBELET_SOCKET_NAME
    if not _is_socket(path):
        return failed(name, f"{path} is missing", "start the kubelet (systemctl status kubelet; journalctl -u kubelet)")
    error = _connects(path)
    if error:
        return failed(name, f"{path} does not answer: {error}", "restart the kubelet (systemctl restart kubelet)")
    return passed(name, f"{path} answers")


def plugin_sockets(opts: NodeOptions) -> Check:
    name = "plugin sockets"
    sockets = sorted(p for p in opts.socket_dir.glob("nvidia-*.sock")) if opts.socket_dir.is_dir() else []
    if not sockets:
        return failed(name, f"no nvidia-*.sock in {opts.socket_dir}: the plugin is not serving", PLUGIN_FIX)
    silent = []
    for path in sockets:
        try:
            asyncio.run(probe.plugin_options(path))
        except Exception as exc:
            silent.append(f"{path.name} ({type(exc).__name__})")
    if silent:
        return failed(name, f"not answering GetDevicePluginOptions: {', '.join(silent)}", PLUGIN_FIX)
    return passed(name, f"{', '.join(p.name for p in sockets)} answer GetDevicePluginOptions")


def registered(opts: NodeOptions) -> tuple[Check, dict[str, list[str]]]:
    """The registration check, and each registered NVIDIA resource's healthy devices (from the checkpoint)."""
    name = "plugin registration"
    path = opts.socket_dir / constants.CHECKPOINT_NAME
    try:
        data = json.loads(path.read_text())
        devices = data["Data"]["RegisteredDevices"] or {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return failed(name, f"cannot read the kubelet checkpoint {path}: {exc}", PLUGIN_FIX), {}
    ours = {r: list(ids or []) for r, ids in devices.items() if r.startswith("nvidia.com/")}
    if not ours:
        return failed(name, f"the kubelet has no nvidia.com/* resource registered ({path})", PLUGIN_FIX), {}
    summary = ", ".join(f"{r} {len(ids)} healthy" for r, ids in sorted(ours.items()))
    return passed(name, f"registered with the kubelet: {summary}"), ours


def machine(opts: NodeOptions) -> tuple[Check, Machine | None]:
    from kubegpu.gpu import errors
    from kubegpu.gpu.backends import read_machine

    name = "NVML and driver"
    try:
        found = read_machine(
            opts.machine, driver_root=opts.driver_root, container_driver_root=opts.container_driver_root
        )
    except errors.GpuError as exc:
        return (
            failed(
                name,
                str(exc),
                "install the NVIDIA driver on the node (nvidia-smi must work), or pass --driver-root where it lives "
                "(e.g. /run/nvidia/driver with the GPU Operator)",
            ),
            None,
        )
    products = sorted({g.product_name for g in found.gpus})
    versions = f"driver {found.driver_version}, CUDA {found.cuda_driver_version}"
    return passed(name, f"{versions}, {len(found.gpus)} GPUs ({', '.join(products)})"), found


def cuda(opts: NodeOptions, found: Machine) -> Check | None:
    """The image-CUDA check, or None when no --cuda-version / --image was given."""
    name = "CUDA compatibility"
    wanted = facts.parse_version(opts.cuda_version) if opts.cuda_version else None
    source = f"CUDA {opts.cuda_version}"
    if wanted is None and opts.image:
        wanted = facts.cuda_of_image(opts.image)
        source = f"image {opts.image}"
        if wanted is None:
            return failed(name, f"no CUDA version in the tag of {opts.image}", "pass --cuda-version X.Y")
    if opts.cuda_source:
        source = f"{opts.cuda_source} ({source})"
    if wanted is None:
        return None
    driver = facts.parse_version(found.cuda_driver_version)
    if facts.cuda_compatible(driver, wanted):
        return passed(name, f"{source} runs on driver {found.driver_version} (CUDA {found.cuda_driver_version})")
    return failed(
        name,
        f"{source} needs CUDA {wanted[0]}.{wanted[1]}; driver {found.driver_version} supports CUDA "
        f"{found.cuda_driver_version} ('CUDA driver version is insufficient for CUDA runtime version')",
        f"upgrade the node's driver to one that supports CUDA {wanted[0]}.{wanted[1]}, or use an image built for "
        f"CUDA {found.cuda_driver_version} or older",
    )


def device_nodes(opts: NodeOptions, found: Machine) -> Check:
    name = "device nodes"
    wanted = ["/dev/nvidiactl", "/dev/nvidia-uvm", *(g.device_node for g in found.gpus)]
    missing = []
    for node in wanted:
        path = opts.dev_root / node.lstrip("/")
        try:
            if not stat.S_ISCHR(path.stat().st_mode):
                missing.append(f"{path} (not a character device)")
        except OSError:
            missing.append(str(path))
    if missing:
        return failed(
            name,
            f"missing: {', '.join(missing)}",
            "load the driver's modules (nvidia-smi creates /dev/nvidia*; nvidia-modprobe -u -c=0 for nvidia-uvm), "
            "or pass --dev-root where the device nodes live",
        )
    return passed(name, f"{len(wanted)} present under {opts.dev_root}")


def cdi_spec(opts: NodeOptions) -> Check | None:
    """The CDI spec check, or None when no cdi-* device-list strategy is configured."""
    if not any(s.startswith("cdi-") for s in opts.device_list_strategy):
        return None
    name = "CDI spec"
    path = opts.cdi_spec_dir / "k8s.device-plugin.nvidia.com-gpu.json"
    if not path.is_file():
        fix = "the plugin writes it at start with a cdi-* strategy: check its log and that --cdi-spec-dir is mounted"
        return failed(name, f"{path} does not exist", fix)
    # The same strict check as `kubegpu cdi validate`, through its command line (the spec model is the plugin's).
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "cdi", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        problem = (done.stderr.strip() or done.stdout.strip()).splitlines()[0:1] or ["invalid"]
        return failed(name, problem[0], f"restart the plugin to rewrite it; kubegpu cdi validate {path} shows it all")
    return passed(name, done.stdout.strip())


def _read_configs(paths: tuple[Path, ...]) -> list[tuple[Path, str]]:
    found = []
    for path in paths:
        files = sorted(path.glob("*")) if path.is_dir() else [path]
        for file in files:
            try:
                found.append((file, file.read_text(errors="replace")))
            except OSError:
                continue
    return found


def container_runtime(opts: NodeOptions) -> Check:
    name = "container runtime"
    configs = _read_configs(opts.runtime_configs)
    fix = (
        "install the NVIDIA Container Toolkit and run: nvidia-ctk runtime configure --runtime=containerd (or crio) "
        "--set-as-default, or enable CDI (containerd: enable_cdi = true), then restart the runtime"
    )
    if not configs:
        looked = ", ".join(str(p) for p in opts.runtime_configs)
        return failed(name, f"no containerd or CRI-O config readable (looked at {looked})", fix)
    for path, text in configs:
        how = facts.runtime_handles_gpus(text)
        if how:
            return passed(name, f"{path} configures the {how}")
    return failed(name, f"neither the NVIDIA runtime nor CDI in {', '.join(str(p) for p, _ in configs)}", fix)


def gpu_health(opts: NodeOptions, found: Machine, healthy: dict[str, list[str]]) -> Check:
    """GPUs none of whose devices the kubelet holds as healthy, with their last XID where the node keeps it."""
    name = "GPU health"
    ids = {i.split("::", 1)[0] for ids in healthy.values() for i in ids}
    mig_parent = {m.uuid: g.uuid for g in found.gpus for m in g.mig_devices}
    held = {mig_parent.get(i, i) for i in ids}
    sick = [g for g in found.gpus if g.uuid not in held]
    if not sick:
        return passed(name, f"all {len(found.gpus)} GPUs healthy")
    last_xid: dict[int, int] = {}
    if opts.fault_file is not None and opts.fault_file.exists():
        from kubegpu.gpu import faults

        last_xid = faults.fold(faults.read_all(opts.fault_file)).last_xid
    described = ", ".join(
        f"GPU {g.index} {g.uuid}" + (f" (last XID {last_xid[g.index]})" if g.index in last_xid else "") for g in sick
    )
    return failed(
        name,
        f"unhealthy: {described}",
        'read the plugin log (msg="device unhealthy" names the XID and its meaning); drain the node and reset the '
        "GPU (nvidia-smi -r -i INDEX) or reboot; the plugin marks it healthy again after the recovery quiet period",
    )


def run(opts: NodeOptions) -> list[Check]:
    """Every node check, in order; checks that need the GPUs are left out when NVML cannot be read."""
    checks = [device_plugin_dir(opts), kubelet_socket(opts), plugin_sockets(opts)]
    registration, healthy = registered(opts)
    checks.append(registration)
    nvml, found = machine(opts)
    checks.append(nvml)
    optional: list[Callable[[], Check | None]] = [lambda: cdi_spec(opts)]
    if found is not None:
        gpu_found = found
        optional = [
            lambda: cuda(opts, gpu_found),
            lambda: device_nodes(opts, gpu_found),
            *optional,
            lambda: gpu_health(opts, gpu_found, healthy) if healthy else None,
        ]
    checks.extend(c for c in (f() for f in optional) if c is not None)
    checks.append(container_runtime(opts))
    return checks
