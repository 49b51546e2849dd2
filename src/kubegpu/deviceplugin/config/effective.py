"""The effective configuration of the plugin, GFD-style labeller and MPS daemon: flags, env vars, file, defaults.

Owns each program's flag table (derived from the one declaration of every flag in
:mod:`.flags`: names, aliases, env vars, defaults), argparse, the precedence rule
(explicit CLI flag > env var > config file > default) in one function
(:func:`resolve`), NVIDIA's post-processing (dev root defaults to the driver root,
MPS blocks fail requests for more than one replica unless told otherwise, default
resource patterns), the flag validation at start ("unable to validate flags: …")
and the frozen :class:`Config` with its JSON form.

Reads files only through :func:`load` (the ``--config-file``); everything else is
pure, but for what argparse itself does (:class:`HelpFormatter` asks ``$COLUMNS`` or the
terminal for the help width, as argparse's own formatter does). Must not declare a flag
(that is :mod:`.flags`), discover devices or talk to the kubelet: the runtime calls
:func:`add_arguments` and :func:`load` and gets a frozen :class:`Config`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kubegpu.common import boolean, durations
from kubegpu.common.validation import (
    Invalid,
    dump,
    validate,
)
from kubegpu.deviceplugin.config import flags, v1
from kubegpu.deviceplugin.config.flags import Flags, Options
from kubegpu.deviceplugin.config.v1 import ConfigError, Imex, ReplicatedResources, Resources, Sharing


@dataclass(frozen=True, kw_only=True)
class Config:
    """The effective configuration. ``to_json()`` is a valid config file that reproduces it."""

    version: Literal["v1"] = "v1"
    flags: Flags
    resources: Resources
    sharing: Sharing
    imex: Imex
    options: Options = field(default_factory=Options)

    @property
    def sharing_strategy(self) -> Literal["none", "time-slicing", "mps"]:
        return self.sharing.strategy

    @property
    def replicated(self) -> ReplicatedResources | None:
        return self.sharing.replicated

    def to_dict(self) -> dict[str, Any]:
        """The effective config in the file's camelCase form (without the command-line-only options)."""
        return dump(self, exclude=("options",))

    def to_json(self) -> str:
        """The effective config as a config file (every block, the ``gfd`` flags too)."""
        return json.dumps(self.to_dict(), indent=2)

    def running_config(self, mig_resources: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
        """What NVIDIA's plugin (and MPS daemon) logs as "Running with config": the effective config without the
        ``gfd`` flags (they clear them: only GFD labels) and, under mixed, ``resources.mig`` with the node's
        default MIG resources appended (``mig_resources``, :mod:`kubegpu.deviceplugin.rm.migdefaults`)."""
        out = self.to_dict()
        out["flags"].pop("gfd", None)
        if mig_resources:
            mig = out["resources"].setdefault("mig", [])
            mig.extend(dict(r) for r in mig_resources if dict(r) not in mig)
        return out


# --- the flag tables, derived from the declarations in :mod:`.flags` ------------------------------


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag of one program: names, env vars (first set wins), kind, config-file key."""

    dest: str
    names: tuple[str, ...]
    envs: tuple[str, ...]
    kind: flags.Kind
    help: str
    key: tuple[str, ...] | None = None  # camelCase path in the config file
    choices: tuple[str, ...] = ()
    metavar: str | None = None


def _table(program: flags.Program) -> tuple[FlagSpec, ...]:
    groups: tuple[tuple[type[Any], tuple[str, ...], str], ...] = (
        (flags.Flags, ("flags",), ""),
        (v1.Imex, ("imex",), "imex_"),
        (flags.Options, (), ""),
    )
    return tuple(
        FlagSpec(
            dest=prefix + name,
            names=cli.names,
            envs=cli.envs_for(program),
            kind=cli.kind,
            help=cli.help_for(program),
            key=key,
            choices=cli.choices,
            metavar=cli.metavar,
        )
        for cls, root, prefix in groups
        for name, key, cli in flags.declared(cls, root)
        if program in cli.programs
    )


PLUGIN_FLAGS = _table("plugin")
GFD_FLAGS = _table("gfd")
MPS_FLAGS = _table("mps")


# --- argparse -------------------------------------------------------------------------------


def _bool_arg(text: str) -> bool:
    try:
        return boolean.parse_bool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration_arg(text: str) -> str:
    try:
        return durations.normalise_duration(text, allow_infinite=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds_arg(text: str) -> str:
    try:
        return durations.normalise_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _intlist_item(text: str) -> list[int]:
    try:
        return [int(x) for x in _split(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer list {text!r}") from None


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


_METAVAR = {
    "seconds": "DURATION",
    "str": "VALUE",
    "bool": "true|false",
    "list": "LIST",
    "intlist": "IDS",
    "duration": "DURATION",
    "path": "PATH",
}


def add_flags(parser: argparse.ArgumentParser, specs: Sequence[FlagSpec]) -> None:
    """Add ``specs`` to ``parser`` (defaults stay None so "not given" is visible to :func:`resolve`)."""
    for spec in specs:
        env = f" [env {', '.join(spec.envs)}]" if spec.envs else ""
        common: dict[str, Any] = {"dest": spec.dest, "default": None, "help": spec.help + env}
        common["metavar"] = spec.metavar or _METAVAR[spec.kind]
        if spec.kind == "bool":
            parser.add_argument(*spec.names, nargs="?", const=True, type=_bool_arg, **common)
        elif spec.kind == "list":
            parser.add_argument(*spec.names, action="append", type=_split, **common)
        elif spec.kind == "intlist":
            parser.add_argument(*spec.names, action="append", type=_intlist_item, **common)
        elif spec.kind == "duration":
            parser.add_argument(*spec.names, type=_duration_arg, **common)
        elif spec.kind == "seconds":
            parser.add_argument(*spec.names, type=_seconds_arg, **common)
        else:
            parser.add_argument(*spec.names, **common)


def plugin_flags(*dests: str) -> tuple[FlagSpec, ...]:
    """The plugin flags with these destinations, for commands that take a subset (``kubegpu cdi generate``)."""
    unknown = set(dests) - {s.dest for s in PLUGIN_FLAGS}
    if unknown:
        raise ValueError(f"no plugin flags {sorted(unknown)}")
    return tuple(s for s in PLUGIN_FLAGS if s.dest in dests)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``nvidia-device-plugin`` flag (and kubegpu's extras) to ``parser``. Defaults stay ``None``
    so :func:`load` can tell "not given" from "given the default"."""
    add_flags(parser, PLUGIN_FLAGS)


def add_gfd_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``gpu-feature-discovery`` flags used by ``kubegpu labels``."""
    add_flags(parser, GFD_FLAGS)


def add_mps_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``mps-control-daemon`` flags used by ``kubegpu mps-daemon``."""
    add_flags(parser, MPS_FLAGS)


# --- precedence -----------------------------------------------------------------------------


def _env_value(spec: FlagSpec, environ: Mapping[str, str]) -> tuple[str, Any] | None:
    """(env var name, parsed value) of the first env var of ``spec`` that is set, or None."""
    for name in spec.envs:
        if name not in environ:
            continue
        raw = environ[name]
        try:
            if spec.kind == "bool":
                return name, boolean.parse_bool(raw.strip())
            if spec.kind == "list":
                return name, _split(raw)
            if spec.kind == "intlist":
                return name, [int(x) for x in _split(raw)]
            if spec.kind == "duration":
                return name, durations.normalise_duration(raw, allow_infinite=True)
            if spec.kind == "seconds":
                return name, durations.normalise_seconds(raw)
        except ValueError as exc:
            raise ConfigError(f"env {name}: {exc}") from None
        return name, raw
    return None


def _cli_value(spec: FlagSpec, args: argparse.Namespace) -> Any:
    value = getattr(args, spec.dest, None)
    if value is not None and spec.kind in ("list", "intlist"):
        value = [item for chunk in value for item in chunk]
    return value


def _given(spec: FlagSpec, args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    """The value of ``spec`` from the command line, else its env var, else None."""
    value = _cli_value(spec, args)
    if value is not None:
        return value
    env = _env_value(spec, environ)
    return None if env is None else env[1]


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _set(data: dict[str, Any], key: Sequence[str], value: Any) -> None:
    node = data
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


def read_config_file(path: str) -> v1.ConfigFile:
    """Read and parse ``path``; a missing or unreadable file is a :class:`ConfigError` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"unable to parse config file: {path}: not a config file (not UTF-8 text)") from None
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"unable to parse config file: error opening config file {path}: {why}") from None
    return v1.parse_text(text, source=path)


def resolve(
    specs: Sequence[FlagSpec],
    args: argparse.Namespace,
    environ: Mapping[str, str],
    file: v1.ConfigFile | None = None,
) -> Config:
    """Apply the precedence (CLI > env > file > default) and NVIDIA's post-processing; validate nothing else.

    ``file`` is the parsed config file (None: none given). Pure: :func:`load` does the reading.
    """
    data: dict[str, Any] = {"flags": {}, "resources": {}, "sharing": {}, "imex": {}}
    if file is not None:
        data = _merge(data, file.to_dict())
    # A deep copy: the overlays below write into nested dicts, which must not be the file's own.
    data = copy.deepcopy(data)
    options: dict[str, Any] = {}
    for spec in specs:
        value = _given(spec, args, environ)
        if value is None:
            continue
        if spec.key is None:
            options[spec.dest] = tuple(value) if isinstance(value, list) else value
        else:
            _set(data, spec.key, value)
    mps = data["sharing"].get("mps")
    if mps is not None and mps.get("failRequestsGreaterThanOne") is None:
        mps["failRequestsGreaterThanOne"] = True
    data["resources"] = _default_resources(data["resources"], str(data["flags"].get("migStrategy", _MIG_DEFAULT)))
    try:
        # Re-validating the merged document checks env and flag values with the file's rules.
        merged = validate(v1.ConfigFile, {k: v for k, v in data.items() if k != "flags"})
        resolved_flags = flags.finish(validate(flags.Flags, data["flags"]))
    except Invalid as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    return Config(
        flags=resolved_flags,
        resources=merged.resources,
        sharing=merged.sharing,
        imex=merged.imex,
        options=flags.Options(**options),
    )


_MIG_DEFAULT = flags.Flags().mig_strategy


def _default_resources(resources: Mapping[str, Any], mig_strategy: str) -> dict[str, Any]:
    """NVIDIA appends ``{pattern: "*", name: nvidia.com/gpu}`` for GPUs (and for MIG under single).

    Appended only when no catch-all is there yet, so loading an effective config again changes nothing.
    Mixed-strategy MIG defaults depend on the machine (one resource per profile): see ``resource_map``.
    """
    out = {"gpus": list(resources.get("gpus", [])), "mig": list(resources.get("mig", []))}
    catch_all = {"pattern": "*", "name": "nvidia.com/gpu"}
    if not any(r.get("pattern") == "*" for r in out["gpus"]):
        out["gpus"].append(catch_all)
    if mig_strategy == "single" and not any(r.get("pattern") == "*" for r in out["mig"]):
        out["mig"].append(catch_all)
    return out


def validate_flags(config: Config, *, plugin_flags: bool = True) -> None:
    """NVIDIA's checks at (re)start, with its texts, prefixed "unable to validate flags: ".

    ``plugin_flags=False`` (the MPS daemon) leaves out what only the plugin takes: the host ``--mps-root``
    (the daemon works under ``--mps-container-root`` alone, as NVIDIA's) and the plugin's intervals.
    """
    problem = _flag_problem(config, plugin_flags)
    if problem:
        raise ConfigError(f"unable to validate flags: {problem}")


def _flag_problem(config: Config, plugin_flags: bool = True) -> str | None:
    plugin = config.flags.plugin
    strategies = plugin.device_list_strategy
    if not strategies:
        return (
            "invalid --device-list-strategy option: no device list strategy specified; "
            f"at least one of [{' '.join(flags.DEVICE_LIST_STRATEGIES)}] is required"
        )
    for strategy in strategies:
        if strategy not in flags.DEVICE_LIST_STRATEGIES:
            return f"invalid --device-list-strategy option: invalid strategy: {strategy}"
    if plugin.device_id_strategy not in flags.DEVICE_ID_STRATEGIES:
        return f"invalid --device-id-strategy option: {plugin.device_id_strategy}"
    if config.sharing_strategy == "mps":
        if config.flags.mig_strategy == "mixed":
            return "using --mig-strategy=mixed is not supported with MPS"
        if plugin_flags and not config.flags.mps_root:
            return "using MPS requires --mps-root to be specified"
    if config.flags.device_discovery_strategy not in flags.DISCOVERY_STRATEGIES:
        return f"invalid --device-discovery-strategy option {config.flags.device_discovery_strategy}"
    if config.flags.mig_strategy not in flags.MIG_STRATEGIES:
        return f"unknown MIG strategy: {config.flags.mig_strategy}"
    ids = list(config.imex.channel_ids)
    if ids not in ([], [0]):
        return f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {ids}"
    if plugin.shared_devices_allocation_policy not in flags.SHARED_POLICIES:
        return f"invalid --shared-devices-allocation-policy option: {plugin.shared_devices_allocation_policy}"
    if plugin.allocation_policy is not None and plugin.allocation_policy not in flags.ALLOCATION_POLICIES:
        return (
            f"invalid --allocation-policy option: {plugin.allocation_policy} "
            f"(choose from {', '.join(flags.ALLOCATION_POLICIES)})"
        )
    if plugin.gpu_milli is not None:
        problem = flags.gpu_milli_problem(plugin.gpu_milli)
        if problem:
            return f"invalid --gpu-milli option: {plugin.gpu_milli!r}: {problem}"
    if not 0 < config.options.retry_interval_s <= 3600:
        return (
            f"invalid --registration-retry-interval option: {config.options.registration_retry_interval} "
            "(must be within (0, 3600] seconds)"
        )
    if plugin_flags and not 0 < config.options.mps_check_interval_s <= 3600:
        return (
            f"invalid --mps-check-interval option: {config.options.mps_check_interval} "
            "(must be within (0, 3600] seconds)"
        )
    if plugin.quiet_period_s < 0:
        return f"invalid --health-recovery-quiet-period option: {plugin.health_recovery_quiet_period} is negative"
    try:
        flags.recovery_classes(plugin.health_recovery_xids)
    except ValueError as exc:
        return f"invalid --health-recovery-xids option: {exc}"
    socket = config.options.kubelet_socket
    if socket and (socket.endswith("/") or Path(socket).name in ("", ".", "..")):
        return f"invalid --kubelet-socket option: {socket!r} needs the socket file's path, e.g. .../kubelet.sock"
    if config.options.metrics_listen is not None:
        try:
            parse_listen(config.options.metrics_listen)
        except ValueError as exc:
            return f"invalid --metrics-listen option: {exc}"
    return None


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9401``, ``:9401`` = every address) as (host, port); ValueError naming the problem."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT with a port from 1 to 65535")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def _config_path(specs: Sequence[FlagSpec], args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    for spec in specs:
        if spec.dest == "config_file":
            value = _given(spec, args, environ)
            return str(value) if value else None
    return None


def load_flags(specs: Sequence[FlagSpec], args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """Read the config file named by ``specs``' ``--config-file`` (if any) and :func:`resolve`; no validation."""
    path = _config_path(specs, args, environ)
    file = read_config_file(path) if path else None
    return resolve(specs, args, environ, file)


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The plugin's effective config from parsed flags (:func:`add_arguments`), env and the config file.

    Raises :class:`ConfigError` (the CLI exits 2 on it) for a bad file, env value or flag.
    """
    config = load_flags(PLUGIN_FLAGS, args, environ)
    validate_flags(config)
    return config


def load_gfd(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The labeller's effective config (:func:`add_gfd_arguments`), checked as GFD checks it at start."""
    config = load_flags(GFD_FLAGS, args, environ)
    problem = _gfd_problem(config)
    if problem:
        raise ConfigError(f"unable to validate flags: {problem}")
    return config


def _gfd_problem(config: Config) -> str | None:
    if config.flags.mig_strategy not in flags.MIG_STRATEGIES:
        return f"unknown MIG strategy: {config.flags.mig_strategy}"
    strategy = config.flags.device_discovery_strategy
    if strategy not in flags.GFD_DISCOVERY_STRATEGIES:
        return f"invalid --device-discovery-strategy option {strategy}"
    options = config.options
    try:
        qps_ok = float(options.kube_api_qps) > 0
    except ValueError:
        qps_ok = False
    if not qps_ok:
        return f"invalid --kube-api-qps option {options.kube_api_qps!r}: a number greater than 0"
    if not (options.kube_api_burst.isdigit() and int(options.kube_api_burst) > 0):
        return f"invalid --kube-api-burst option {options.kube_api_burst!r}: an integer greater than 0"
    if config.flags.use_node_feature_api:
        # GFD's NewOutputer: the NodeFeature object is named after the node and lives in a namespace.
        if not options.node_name:
            return "required flag node-name not set (--node-name or NODE_NAME; or --use-node-feature-api=false)"
        if not options.namespace:
            return "required flag namespace not set"
    return None


def load_mps(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The MPS daemon's effective config (:func:`add_mps_arguments`)."""
    config = load_flags(MPS_FLAGS, args, environ)
    if config.flags.mig_strategy not in flags.MIG_STRATEGIES:
        raise ConfigError(f"unable to validate flags: unknown MIG strategy: {config.flags.mig_strategy}")
    return config


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout at the width argparse would choose, found without ``shutil``.

    argparse sizes a formatter with ``shutil.get_terminal_size()`` and makes one for every
    ``add_argument``; importing ``shutil`` (and with it bz2, lzma, fnmatch) was part of every plugin start.
    The width comes from the same sources in the same order: ``$COLUMNS`` when a positive
    integer, else the terminal on stdout, else 80.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout, closed, not a terminal
        return 80


def parser(prog: str = "kubegpu plugin") -> argparse.ArgumentParser:
    """A parser with the plugin's flags and ``--print-config`` (``kubegpu plugin`` uses it)."""
    p = argparse.ArgumentParser(
        prog=prog,
        formatter_class=HelpFormatter,
        description="The NVIDIA k8s-device-plugin compatible device plugin: advertises GPUs, MIG devices and "
        "shared replicas to the kubelet, keeps their health, answers Allocate and GetPreferredAllocation. "
        "Flags > env vars > --config-file > defaults. SIGHUP re-reads the config and restarts; SIGTERM stops.",
    )
    add_arguments(p)
    p.add_argument("--print-config", action="store_true", help="print the effective config as JSON and exit")
    return p
