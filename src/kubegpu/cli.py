"""The one entry point: ``kubegpu COMMAND [ARGS]``.

Owns the command table, the global logging options and their formatters, and
the exit-code convention (0 ok, 1 failure, 2 bad input). Thin on purpose: each
command lives in the package that owns it and is imported only when run, so
``kubegpu plugin`` never pays for the simulator's numpy or the exporter's HTTP
stack. Must not contain command logic.

Commands are named one way: the command line of ``kubegpu X`` is a module named
``command.py`` in the package that owns X (``deviceplugin/plugin/command.py`` is
``kubegpu plugin``, ``kubelet/command.py`` is ``kubegpu kubelet``). Its entry point
is ``main(argv: list[str]) -> int``, or the function named after a colon in the
table when one package owns two commands (``kubegpu.gpu.command:fault_main``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

#: command -> (module, one-line summary). Modules are imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("kubegpu.demo.command", "a simulated GPU node end to end: emulator + plugin + exporter, in about 4 s"),
    "plugin": ("kubegpu.deviceplugin.plugin.command", "the NVIDIA-compatible device plugin (DaemonSet on GPU nodes)"),
    "kubelet": ("kubegpu.kubelet.command", "the kubelet device-manager emulator and its client commands"),
    "fault": ("kubegpu.gpu.command:fault_main", "inject XID / ECC / lost / recover faults into a simulated machine"),
    "machines": ("kubegpu.gpu.command:machines_main", "list, show and export the simulated machine profiles"),
    "topology": ("kubegpu.placement.command", "show a machine's GPU topology; pick GPUs with a policy"),
    "cdi": ("kubegpu.deviceplugin.cdi.command", "generate CDI specs for a machine"),
    "labels": ("kubegpu.deviceplugin.gfd.command", "GPU feature discovery node labels"),
    "mps-daemon": ("kubegpu.deviceplugin.mps.command", "manage MPS control daemons for shared resources"),
    "exporter": ("kubegpu.monitoring.command", "dcgm-exporter-compatible Prometheus metrics with pod labels"),
    "simulate": ("kubegpu.scheduling.simulate.command", "trace-driven GPU scheduling simulator (FGD reproduction)"),
    "scheduler": ("kubegpu.scheduling.live.command", "GPU-aware scheduler for a cluster: profiles, gangs, preemption"),
    "config-manager": ("kubegpu.configmanager.command", "choose the plugin config from a node label, SIGHUP on change"),
    "doctor": ("kubegpu.doctor.command", "the troubleshooting list as checks: node, then cluster; each with its fix"),
}

_GLOBAL_OPTIONS = ("--log-format", "--log-level")

# Attributes every LogRecord has; anything else was passed through ``extra=`` and is a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class KeyValueFormatter(logging.Formatter):
    """``ts=… level=info logger=… msg="…" key=value …`` — one line per event."""

    def format(self, record: logging.LogRecord) -> str:
        parts = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            parts["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return " ".join(f"{k}={_quote(v)}" for k, v in parts.items())


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line with ``ts``, ``level``, ``logger``, ``msg`` and the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """Send kubegpu's logs to stderr in ``fmt`` (``text`` = key=value, or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("asyncio").setLevel(logging.WARNING)


def _split_global(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Pull ``--log-format``/``--log-level`` out of argv wherever they appear."""
    options: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in _GLOBAL_OPTIONS:
            if not eq:
                if i + 1 >= len(args):
                    raise SystemExit(_usage_error(f"{name} needs a value"))
                value = args[i + 1]
                i += 1
            options[name] = value
        else:
            rest.append(arg)
        i += 1
    return options, rest


def _one_line_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """Bad input on any command's line: one line naming the problem and exit 2, not argparse's usage block."""
    parser.exit(2, f"{parser.prog}: error: {message}\n")


def _usage_error(message: str) -> int:
    print(f"kubegpu: error: {message}", file=sys.stderr)
    return 2


def _help() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = [
        "usage: kubegpu [--log-format text|json] [--log-level LEVEL] COMMAND [ARGS...]",
        "",
        "The Kubernetes GPU stack: device plugin, kubelet emulator, scheduling, monitoring.",
        "",
        "commands:",
        *(f"  {name.ljust(width)}  {summary}" for name, (_, summary) in COMMANDS.items()),
        "",
        "global options (anywhere on the line; env KUBEGPU_LOG_FORMAT, KUBEGPU_LOG_LEVEL):",
        "  --log-format text|json   key=value lines (default) or one JSON object per line",
        "  --log-level LEVEL        debug, info (default), warning, error",
        "",
        "Run 'kubegpu COMMAND --help' for a command's options.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a command; returns the process exit code."""
    options, args = _split_global(sys.argv[1:] if argv is None else argv)
    # The exporter also takes dcgm-exporter's variable, so a dcgm-exporter DaemonSet logs as it asked.
    exporter_fmt = os.environ.get("DCGM_EXPORTER_LOG_FORMAT") if args[:1] == ["exporter"] else None
    fmt = options.get("--log-format", os.environ.get("KUBEGPU_LOG_FORMAT") or exporter_fmt or "text")
    level = options.get("--log-level", os.environ.get("KUBEGPU_LOG_LEVEL", "info"))
    if fmt not in ("text", "json"):
        return _usage_error(f"--log-format must be text or json, got {fmt!r}")
    if level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        return _usage_error(f"--log-level must be debug, info, warning or error, got {level!r}")
    if not args:
        print(_help(), file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(_help())
        return 0
    if args[0] == "--version":
        from kubegpu import __version__

        print(f"kubegpu {__version__}")
        return 0
    command = args[0]
    if command not in COMMANDS:
        return _usage_error(f"unknown command {command!r} (choose from {', '.join(COMMANDS)})")
    if "--version" in args[1 : args.index("--") if "--" in args else None]:
        from kubegpu import __version__

        print(f"kubegpu {command} {__version__}")
        return 0
    setup_logging(fmt, level)
    # Every command's parser reports bad input the same way (see --help for the usage).
    argparse.ArgumentParser.error = _one_line_error  # type: ignore[method-assign,assignment]
    module_name, _, function = COMMANDS[command][0].partition(":")
    entry = getattr(importlib.import_module(module_name), function or "main")
    try:
        return int(entry(args[1:]))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``kubegpu machines list | head -1``): not our error. Point stdout at
        # /dev/null so the interpreter's final flush does not report it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


if __name__ == "__main__":
    sys.exit(main())
