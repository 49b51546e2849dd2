"""The config switch on disk and the signal to the plugin: point the destination at the chosen config, SIGHUP.

The destination (``/config/config.yaml``) is a symbolic link to ``<srcdir>/<name>`` (``/dev/null`` for the empty
config), replaced atomically (a new link beside it, renamed over), so the plugin never reads half a switch. The
process to signal is found by name in ``/proc`` (the pod shares its process namespace): its command name, or the
base name of its program or of the script a Python interpreter runs. Must not choose the config.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

EMPTY_TARGET = "/dev/null"


def target(srcdir: Path, name: str) -> str:
    """Where the destination should point for config ``name`` ("" = the empty config)."""
    return str(srcdir / name) if name else EMPTY_TARGET


def current(dst: Path) -> str | None:
    """The destination's link target now, or None when there is no link."""
    try:
        return os.readlink(dst)
    except OSError:
        return None


def link(dst: Path, to: str) -> bool:
    """Point ``dst`` at ``to``; True when that changed it."""
    if current(dst) == to:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(to, tmp)
    os.replace(tmp, dst)
    return True


def available(srcdir: Path) -> set[str]:
    """The config names in ``srcdir`` (a mounted ConfigMap: its keys; Kubernetes' ``..data`` links are not names)."""
    if not srcdir.is_dir():
        return set()
    return {p.name for p in srcdir.iterdir() if not p.name.startswith(".") and p.is_file()}


def _names(pid: str, proc: Path) -> set[str]:
    names: set[str] = set()
    with contextlib.suppress(OSError):
        names.add((proc / pid / "comm").read_text().strip())
    with contextlib.suppress(OSError):
        argv = (proc / pid / "cmdline").read_bytes().split(b"\0")
        names.update(os.path.basename(a.decode(errors="replace")) for a in argv[:2] if a)
    return names


def find(process: str, proc: Path = Path("/proc")) -> list[int]:
    """Processes named ``process`` (comm is cut to 15 characters by the kernel), this one excluded."""
    me = str(os.getpid())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == me:
            continue
        names = _names(entry.name, proc)
        if process in names or process[:15] in {n for n in names if len(n) == 15}:
            found.append(int(entry.name))
    return sorted(found)


def send(process: str, signum: int = signal.SIGHUP, proc: Path = Path("/proc")) -> list[int]:
    """Signal every process named ``process``; the pids signalled (gone ones skipped)."""
    sent = []
    for pid in find(process, proc):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
            sent.append(pid)
    return sent
