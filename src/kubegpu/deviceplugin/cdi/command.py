"""``kubegpu cdi``: generate the plugin's CDI specs offline, and check a spec with our strict model.

Owns the command line of ``kubegpu cdi generate`` (a simulated machine profile or
NVML, the plugin's CDI-relevant flags, env vars and config file; writes the
specs the plugin would write at start into ``--output``) and ``kubegpu cdi
validate FILE…``. Must not start a plugin or touch ``/var/run/cdi`` unless told to.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kubegpu.deviceplugin.cdi import generate, hostfiles, schema, writer
from kubegpu.deviceplugin.config import effective
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.rm import mig_caps

_FLAGS = effective.plugin_flags(
    "config_file",
    "mig_strategy",
    "device_id_strategy",
    "nvidia_driver_root",
    "nvidia_dev_root",
    "container_driver_root",
    "nvidia_ctk_path",
    "cdi_disable_hooks",
    "imex_channel_ids",
    "gdrcopy_enabled",
    "gds_enabled",
    "mofed_enabled",
    "machine",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubegpu cdi", description="CDI specs of the device plugin.")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    gen = sub.add_parser(
        "generate",
        help="write the CDI specs the plugin writes at start",
        description="Write k8s.device-plugin.nvidia.com-gpu.json (and the IMEX/gdrcopy/GDS/MOFED specs when "
        "enabled) for a simulated machine (--machine) or this host's GPUs (NVML).",
    )
    gen.add_argument("--output", "-o", required=True, metavar="DIR", help="spec directory to write, or - for stdout")
    gen.add_argument(
        "--proc-root",
        default="/proc",
        metavar="PATH",
        help="where driver/nvidia-caps/mig-minors is read (default /proc; the driver's numbering when absent)",
    )
    gen.add_argument(
        "--discover",
        action="store_true",
        help="look for control nodes and driver libraries under the dev and driver roots "
        "(default for NVML; a simulated machine otherwise has every control node and no libraries)",
    )
    effective.add_flags(gen, _FLAGS)
    val = sub.add_parser("validate", help="check CDI spec files with the strict model")
    val.add_argument("files", nargs="+", type=Path, metavar="FILE")
    return parser


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.action == "validate":
        return _validate(args.files)
    return _generate(parser, args)


def _validate(files: list[Path]) -> int:
    """0: every spec valid; 1: a spec is invalid; 2: a file cannot be read at all (missing, binary, a directory)."""
    bad = 0
    unreadable = 0
    for path in files:
        try:
            spec = schema.parse_text(path.read_text(encoding="utf-8"), str(path))
        except UnicodeDecodeError:
            print(f"{path}: not a CDI spec (not UTF-8 text)", file=sys.stderr)
            unreadable += 1
            continue
        except schema.CdiError as exc:
            print(str(exc), file=sys.stderr)
            bad += 1
            continue
        except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
            print(f"{path}: cannot read: {exc.strerror if isinstance(exc, OSError) else exc}", file=sys.stderr)
            unreadable += 1
            continue
        print(f"{path}: ok ({spec.kind}, cdiVersion {spec.cdi_version}, {len(spec.devices)} devices)")
    return 2 if unreadable else 1 if bad else 0


def _generate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from kubegpu.gpu import errors
    from kubegpu.gpu.backends import read_machine

    try:
        cfg = effective.load_flags(_FLAGS, args, os.environ)
        effective.validate_flags(cfg)
    except ConfigError as exc:
        print(f"kubegpu cdi: error: {exc}", file=sys.stderr)
        return 2
    discover = args.discover or cfg.options.machine is None  # on NVML the host is real: look at its files
    try:
        machine = read_machine(
            cfg.options.machine,
            driver_root=cfg.flags.nvidia_driver_root,
            container_driver_root=cfg.flags.plugin.container_driver_root,
        )
    except errors.ProfileError as exc:
        parser.error(str(exc))
    except errors.GpuError as exc:
        print(f"kubegpu cdi: cannot read the GPUs: {exc}", file=sys.stderr)
        return 1
    host = generate.HostFiles()
    if discover:
        host = hostfiles.discover(
            Path(cfg.flags.nvidia_driver_root), Path(cfg.flags.nvidia_dev_root), machine.driver_version
        )
    try:
        specs = generate.specs(machine, cfg, host, mig_caps.read(Path(args.proc_root)))
    except mig_caps.MigCapsError as exc:
        print(f"kubegpu cdi: {exc}", file=sys.stderr)
        return 1
    if args.output == "-":
        for spec in specs:
            sys.stdout.write(spec.to_json())
        return 0
    try:
        for path in writer.write_all(specs, Path(args.output)):
            print(f"wrote {path}")
    except OSError as exc:
        print(f"kubegpu cdi: cannot write to {args.output}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
