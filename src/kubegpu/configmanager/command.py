"""``kubegpu config-manager`` (``config-manager`` in the image): NVIDIA's config-manager sidecar and init container.

Owns the command line — NVIDIA's flags and env vars (``--oneshot``/``ONESHOT``, ``--kubeconfig``,
``--node-name``/``NODE_NAME``, ``--node-label``/``NODE_LABEL``, ``--config-file-srcdir``/``CONFIG_FILE_SRCDIR``,
``--config-file-dst``/``CONFIG_FILE_DST``, ``--default-config``/``DEFAULT_CONFIG``,
``--fallback-strategies``/``FALLBACK_STRATEGIES``, ``--send-signal``/``SEND_SIGNAL``, ``--signal``/``SIGNAL``,
``--process-to-signal``/``PROCESS_TO_SIGNAL``) — and the loop: for each value of the node's label, choose the
config, link it, and signal the plugin when the link changed. ``--oneshot`` does it once (exit 1 when no config can
be chosen); the sidecar logs a bad choice, keeps the current config and waits for the next change. Must not parse
plugin configs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubegpu.common.boolean import parse_bool
from kubegpu.configmanager import selection, switch

log = logging.getLogger(__name__)

DEFAULT_LABEL = "nvidia.com/device-plugin.config"


class UsageError(ValueError):
    """A flag or env value is wrong; the message names it."""


@dataclass(frozen=True)
class Options:
    oneshot: bool
    kubeconfig: str | None
    node_name: str
    node_label: str
    srcdir: Path
    dst: Path
    default: str
    fallbacks: tuple[str, ...]
    send_signal: bool
    signal: int
    process: str


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubegpu config-manager",
        description="Choose the device plugin's config from the node label nvidia.com/device-plugin.config among "
        "the named configs of a directory (a mounted ConfigMap), link it to the plugin's config file and SIGHUP "
        "the plugin when it changes (NVIDIA's config-manager).",
    )
    p.add_argument(
        "--oneshot", nargs="?", const="true", metavar="true|false", help="choose once and exit [env ONESHOT]"
    )
    p.add_argument("--kubeconfig", help="kubeconfig file [env KUBECONFIG]; default: in-cluster service account")
    p.add_argument("--node-name", help="the node whose label chooses [env NODE_NAME]")
    p.add_argument("--node-label", help=f"the label (default {DEFAULT_LABEL}) [env NODE_LABEL]")
    p.add_argument(
        "--config-file-srcdir", metavar="DIR", help="directory of the named configs [env CONFIG_FILE_SRCDIR]"
    )
    p.add_argument(
        "--config-file-dst", metavar="PATH", help="the plugin's config file, made a link [env CONFIG_FILE_DST]"
    )
    p.add_argument("--default-config", help="config when the label is not set [env DEFAULT_CONFIG]")
    p.add_argument(
        "--fallback-strategies",
        help="then, in order: named (a config named default), single (the only one), empty (none) "
        "(default named,single) [env FALLBACK_STRATEGIES]",
    )
    p.add_argument(
        "--send-signal",
        nargs="?",
        const="true",
        metavar="true|false",
        help="signal the plugin on change (default true) [env SEND_SIGNAL]",
    )
    p.add_argument("--signal", help="signal number (default 1, SIGHUP) [env SIGNAL]")
    p.add_argument("--process-to-signal", help="process name (default nvidia-device-plugin) [env PROCESS_TO_SIGNAL]")
    return p


def _value(flag: str | None, env: Mapping[str, str], name: str, default: str = "") -> str:
    if flag is not None:
        return flag
    return env.get(name, default)


def _bool(text: str, what: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError:
        raise UsageError(f"{what}: invalid boolean {text!r}") from None


def options(argv: list[str], env: Mapping[str, str]) -> Options:
    """Flags beat env vars beat defaults; raises UsageError (or SystemExit 2 from argparse) on bad input."""
    args = parser().parse_args(argv)
    node = _value(args.node_name, env, "NODE_NAME")
    srcdir = _value(args.config_file_srcdir, env, "CONFIG_FILE_SRCDIR")
    dst = _value(args.config_file_dst, env, "CONFIG_FILE_DST")
    for text, what in (
        (node, "--node-name / NODE_NAME"),
        (srcdir, "--config-file-srcdir / CONFIG_FILE_SRCDIR"),
        (dst, "--config-file-dst / CONFIG_FILE_DST"),
    ):
        if not text:
            raise UsageError(f"{what} is required")
    signal_text = _value(args.signal, env, "SIGNAL", "1")
    try:
        signum = int(signal_text)
        signal.Signals(signum)
    except ValueError:
        raise UsageError(f"--signal / SIGNAL: not a signal number: {signal_text!r}") from None
    try:
        fallbacks = selection.parse_fallbacks(
            _value(args.fallback_strategies, env, "FALLBACK_STRATEGIES", "named,single")
        )
    except selection.SelectionError as exc:
        raise UsageError(f"--fallback-strategies / FALLBACK_STRATEGIES: {exc}") from None
    return Options(
        oneshot=_bool(_value(args.oneshot, env, "ONESHOT", "false"), "--oneshot / ONESHOT"),
        kubeconfig=args.kubeconfig or env.get("KUBECONFIG") or None,
        node_name=node,
        node_label=_value(args.node_label, env, "NODE_LABEL", DEFAULT_LABEL),
        srcdir=Path(srcdir),
        dst=Path(dst),
        default=_value(args.default_config, env, "DEFAULT_CONFIG"),
        fallbacks=fallbacks,
        send_signal=_bool(_value(args.send_signal, env, "SEND_SIGNAL", "true"), "--send-signal / SEND_SIGNAL"),
        signal=signum,
        process=_value(args.process_to_signal, env, "PROCESS_TO_SIGNAL", "nvidia-device-plugin"),
    )


def apply(opts: Options, label_value: str | None) -> selection.Selection:
    """Choose and link the config for ``label_value``; signal when the link changed. Raises SelectionError."""
    chosen = selection.select(label_value, switch.available(opts.srcdir), opts.default, opts.fallbacks, opts.node_label)
    changed = switch.link(opts.dst, switch.target(opts.srcdir, chosen.name))
    log.info(
        "config selected" if changed else "config unchanged",
        extra={"config": chosen.name or "(empty)", "reason": chosen.reason, "label": label_value or "(unset)"},
    )
    if changed and opts.send_signal and not opts.oneshot:
        pids = switch.send(opts.process, opts.signal)
        log.info("signalled", extra={"target_process": opts.process, "signal": opts.signal, "pids": pids})
    return chosen


async def run(opts: Options, label_values: AsyncIterator[str | None]) -> int:
    """Apply every label value; 0 after the values end (or after the first, with ``oneshot``), 1 on a bad oneshot."""
    async for value in label_values:
        try:
            apply(opts, value)
        except (selection.SelectionError, OSError) as exc:
            if opts.oneshot:
                print(f"kubegpu config-manager: error: {exc}", file=sys.stderr)
                return 1
            log.error("config not switched, keeping the current one", extra={"error": str(exc)})
        if opts.oneshot:
            return 0
    return 0


async def _main(opts: Options) -> int:
    from kubegpu import kubeconfig
    from kubegpu.configmanager import nodes

    client = kubeconfig.client(opts.kubeconfig)
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run(opts, nodes.label_values(client, opts.node_name, opts.node_label)))
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        return 0
    finally:
        await client.close()


def main(argv: list[str]) -> int:
    try:
        opts = options(argv, os.environ)
    except UsageError as exc:
        print(f"kubegpu config-manager: error: {exc}", file=sys.stderr)
        return 2
    from kubegpu import kubeconfig

    try:
        kubeconfig.load(opts.kubeconfig)
    except kubeconfig.KubeconfigError as exc:
        print(f"kubegpu config-manager: error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_main(opts))
