"""CDI specs of a machine, as NVIDIA's plugin generates them (reference section h).

Owns building the ``k8s.device-plugin.nvidia.com/gpu`` spec (one device per
whole GPU and per MIG device, named by the device-id strategy, with its device
nodes; common edits with the control nodes, driver library mounts,
``NVIDIA_VISIBLE_DEVICES=void`` and the CDI hooks, minus ``--cdi-disable-hooks``),
the IMEX channel spec and the gdrcopy/GDS/MOFED specs (skipped when empty), with
host paths under the driver and dev roots. Pure: what exists on the host
(control nodes, driver libraries, feature device nodes) comes in as
:class:`HostFiles`, found by :mod:`kubegpu.deviceplugin.cdi.hostfiles`.

Differs from NVIDIA in one place: with ``--mig-strategy none`` a MIG-enabled GPU
is advertised whole, so its spec gets a whole-GPU device too (NVIDIA's spec has
none, and such an allocation cannot start).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from kubegpu.deviceplugin.cdi import schema
from kubegpu.deviceplugin.cdi.schema import ContainerEdits, Device, DeviceNode, Hook, Mount, Spec
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.rm import mig_caps, responses
from kubegpu.gpu.model import Gpu, Machine, MigDevice

VENDOR = responses.CDI_VENDOR
GPU_KIND = f"{VENDOR}/{responses.CDI_GPU_CLASS}"
IMEX_KIND = f"{VENDOR}/{responses.CDI_IMEX_CLASS}"
#: Control nodes in the order NVIDIA's spec lists them; each only when present.
CONTROL_NODES = ("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm", "/dev/nvidiactl")
#: The hooks NVIDIA's specs carry; ``--cdi-disable-hooks all`` removes every one.
HOOKS = ("create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification")
LIBRARY_MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")


@dataclass(frozen=True)
class CdiOptions:
    """What spec building depends on (from the effective config)."""

    device_id_strategy: str = "uuid"
    driver_root: str = "/"
    dev_root: str = "/"
    hook_path: str = "/usr/bin/nvidia-ctk"
    disabled_hooks: tuple[str, ...] = ()
    mig_strategy: str = "none"

    @classmethod
    def from_config(cls, config: Config) -> CdiOptions:
        return cls(
            device_id_strategy=config.flags.plugin.device_id_strategy,
            driver_root=config.flags.nvidia_driver_root,
            dev_root=config.flags.nvidia_dev_root,
            hook_path=config.flags.plugin.nvidia_ctk_path,
            disabled_hooks=tuple(config.options.cdi_disable_hooks),
            mig_strategy=config.flags.mig_strategy,
        )

    def hook_enabled(self, name: str) -> bool:
        return "all" not in self.disabled_hooks and name not in self.disabled_hooks


@dataclass(frozen=True)
class HostFiles:
    """What was found on the host: control nodes (container paths), driver libraries (paths relative to
    the driver root, e.g. ``/usr/lib/x86_64-linux-gnu/libcuda.so.550.107.02``), feature device nodes."""

    control_nodes: tuple[str, ...] = CONTROL_NODES
    libraries: tuple[str, ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()  # (target, link) pairs for create-symlinks
    gdrcopy_nodes: tuple[str, ...] = ()
    gds_nodes: tuple[str, ...] = ()
    mofed_nodes: tuple[str, ...] = ()


def device_name(gpu: Gpu, mig: MigDevice | None, id_strategy: str) -> str:
    """The spec device name: the UUID, or NVIDIA's index (``3``, ``3:1``) with the index strategy."""
    if id_strategy == "index":
        return str(gpu.index) if mig is None else mig.id_index
    return gpu.uuid if mig is None else mig.uuid


def _node(path: str, dev_root: str) -> DeviceNode:
    host = responses.host_path(dev_root, path)
    return DeviceNode(path=path, host_path=None if host == path else host)


def _hook(options: CdiOptions, name: str, *args: str) -> Hook:
    # nvidia-ctk takes hooks as a subcommand; the standalone nvidia-cdi-hook takes them directly.
    binary = posixpath.basename(options.hook_path)
    argv = [binary, "hook", name, *args] if binary == "nvidia-ctk" else [binary, name, *args]
    return Hook(hook_name="createContainer", path=options.hook_path, args=tuple(argv))


def gpu_devices(machine: Machine, options: CdiOptions, minors: mig_caps.MigMinors) -> list[Device]:
    """One CDI device per whole GPU and per MIG device, in NVML order."""
    out: list[Device] = []
    for gpu in machine.gpus:
        if not gpu.mig_enabled or options.mig_strategy == "none":
            out.append(
                Device(
                    name=device_name(gpu, None, options.device_id_strategy),
                    container_edits=ContainerEdits(device_nodes=(_node(gpu.device_node, options.dev_root),)),
                )
            )
        if not gpu.mig_enabled:
            continue
        for mig in gpu.mig_devices:
            paths = mig_caps.mig_device_paths(gpu.minor, mig.gi_id, mig.ci_id, minors)
            out.append(
                Device(
                    name=device_name(gpu, mig, options.device_id_strategy),
                    container_edits=ContainerEdits(device_nodes=tuple(_node(p, options.dev_root) for p in paths)),
                )
            )
    return out


def common_edits(machine: Machine, options: CdiOptions, host: HostFiles) -> ContainerEdits:
    """Spec-level edits: control nodes, driver libraries, ``NVIDIA_VISIBLE_DEVICES=void``, hooks."""
    nodes = [_node(p, options.dev_root) for p in CONTROL_NODES if p in host.control_nodes]
    mounts = [
        Mount(
            host_path=posixpath.join(options.driver_root, lib.lstrip("/")),
            container_path=lib,
            options=LIBRARY_MOUNT_OPTIONS,
        )
        for lib in host.libraries
    ]
    hooks: list[Hook] = []
    if host.symlinks and options.hook_enabled("create-symlinks"):
        links = [arg for target, link in host.symlinks for arg in ("--link", f"{target}::{link}")]
        hooks.append(_hook(options, "create-symlinks", *links))
    if options.hook_enabled("enable-cuda-compat"):
        hooks.append(_hook(options, "enable-cuda-compat", f"--host-driver-version={machine.driver_version}"))
    folders = sorted({posixpath.dirname(lib) for lib in host.libraries})
    if folders and options.hook_enabled("update-ldcache"):
        hooks.append(_hook(options, "update-ldcache", *[a for f in folders for a in ("--folder", f)]))
    if options.hook_enabled("disable-device-node-modification"):
        hooks.append(_hook(options, "disable-device-node-modification"))
    return ContainerEdits(
        env=("NVIDIA_VISIBLE_DEVICES=void",),
        device_nodes=tuple(nodes) or None,
        mounts=tuple(mounts) or None,
        hooks=tuple(hooks) or None,
    )


def _finish(kind: str, devices: Sequence[Device], common: ContainerEdits | None) -> Spec:
    """A spec at the oldest version that expresses its content (as NVIDIA's library chooses)."""
    draft = Spec(cdi_version=schema.CURRENT_VERSION, kind=kind, devices=tuple(devices), container_edits=common)
    return Spec(cdi_version=schema.required_version(draft), kind=kind, devices=tuple(devices), container_edits=common)


def gpu_spec(
    machine: Machine, options: CdiOptions, host: HostFiles = HostFiles(), minors: mig_caps.MigMinors | None = None
) -> Spec:
    """The ``k8s.device-plugin.nvidia.com/gpu`` spec of ``machine``."""
    devices = gpu_devices(machine, options, minors or mig_caps.driver_layout())
    return _finish(GPU_KIND, devices, common_edits(machine, options, host))


def imex_spec(channels: Sequence[int], options: CdiOptions) -> Spec | None:
    """One device per IMEX channel (named by its ID); None when there are none."""
    if not channels:
        return None
    devices = [
        Device(
            name=str(c),
            container_edits=ContainerEdits(device_nodes=(_node(responses.imex_channel_node(c), options.dev_root),)),
        )
        for c in channels
    ]
    return _finish(IMEX_KIND, devices, None)


def feature_spec(feature: str, nodes: Sequence[str], options: CdiOptions) -> Spec | None:
    """A gdrcopy/gds/mofed spec with one device ``all``; None when nothing was found (NVIDIA skips empty specs)."""
    if not nodes:
        return None
    device = Device(
        name="all", container_edits=ContainerEdits(device_nodes=tuple(_node(n, options.dev_root) for n in nodes))
    )
    return _finish(f"{VENDOR}/{feature}", [device], None)


def specs(
    machine: Machine,
    config: Config,
    host: HostFiles = HostFiles(),
    minors: mig_caps.MigMinors | None = None,
    imex_channels: Sequence[int] | None = None,
) -> list[Spec]:
    """Every spec the plugin writes at (re)start: gpu, imex-channel, and the enabled, non-empty features."""
    options = CdiOptions.from_config(config)
    out = [gpu_spec(machine, options, host, minors)]
    imex = imex_spec(list(config.imex.channel_ids if imex_channels is None else imex_channels), options)
    if imex is not None:
        out.append(imex)
    for feature, enabled, nodes in (
        ("gdrcopy", config.flags.gdrcopy_enabled, host.gdrcopy_nodes),
        ("gds", config.flags.gds_enabled, host.gds_nodes),
        ("mofed", config.flags.mofed_enabled, host.mofed_nodes),
    ):
        spec = feature_spec(feature, nodes, options) if enabled else None
        if spec is not None:
            out.append(spec)
    return out
