"""Files the emulator keeps: atomic writes, the socket-directory clean-up, its own state directory.

Owns every filesystem effect of the emulator except sockets: writing a file
atomically the way the kubelet's checkpoint manager does (a temp file named
``.<name><random>`` in the same directory, fsync, rename), cleaning the
device-plugin directory at start (every non-directory entry except the
checkpoint goes; that is how plugins learn the kubelet restarted), and the
paths derived from ``--socket-dir``. Must not decide what goes in the files.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from kubegpu.api import constants

log = logging.getLogger(__name__)

#: The emulator's own directory inside the socket dir. A directory survives the start-up
#: clean-up, and events inside it are invisible to plugins watching the socket dir.
STATE_DIR_NAME = ".kubegpu-kubelet"
CONTROL_SOCKET_NAME = "control.sock"
POD_STORE_NAME = "pods.json"


def state_dir(socket_dir: Path) -> Path:
    return socket_dir / STATE_DIR_NAME


def control_socket(socket_dir: Path) -> Path:
    """Where the emulator's control API listens for a given ``--socket-dir``."""
    return state_dir(socket_dir) / CONTROL_SOCKET_NAME


def pod_store(socket_dir: Path) -> Path:
    """The emulator's record of admitted pods (its stand-in for the apiserver)."""
    return state_dir(socket_dir) / POD_STORE_NAME


def checkpoint_path(socket_dir: Path) -> Path:
    return socket_dir / constants.CHECKPOINT_NAME


def default_pod_resources_socket(socket_dir: Path) -> Path:
    """``<socket dir>/../pod-resources/kubelet.sock``: the kubelet's path when the socket dir is the default."""
    return socket_dir.absolute().parent / "pod-resources" / constants.KUBELET_SOCKET_NAME


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a torn one."""
    fd, tmp = tempfile.mkstemp(prefix="." + path.name, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def clean_socket_dir(socket_dir: Path) -> list[str]:
    """Delete every non-directory entry except the checkpoint; returns the names removed."""
    removed: list[str] = []
    for entry in sorted(socket_dir.iterdir()):
        if entry.name == constants.CHECKPOINT_NAME or (entry.is_dir() and not entry.is_symlink()):
            continue
        try:
            entry.unlink()
            removed.append(entry.name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            # The kubelet logs and carries on; a file it cannot delete does not stop it starting.
            log.error("cannot remove file from socket dir", extra={"path": str(entry), "error": str(exc)})
    return removed
