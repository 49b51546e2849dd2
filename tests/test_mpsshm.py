"""``mps-control-daemon mount-shm``: NVIDIA's tmpfs options and size, mounted for real in a private mount namespace."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu import mpsshm

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("meminfo", "size"),
    [
        ("MemTotal:       24682704 kB\nMemFree:  100 kB\n", "12341352k"),
        ("MemFree:  100 kB\n", "65536k"),
        ("MemTotal: lots kB\n", "65536k"),
    ],
    ids=["half", "no-total", "garbled"],
)
def test_the_size_is_half_the_node_memory_else_nvidias_fallback(meminfo: str, size: str) -> None:
    assert mpsshm.size(meminfo) == size


def _can_mount() -> bool:
    """Whether a private mount namespace where we may mount can be had (root, or a user namespace)."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30, check=False).returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="mounting needs unshare -rm (root or user namespaces)")
def test_mount_shm_mounts_a_tmpfs_once_with_nvidias_options(tmp_path: Path) -> None:
    script = (
        f"{BIN / 'mps-control-daemon'} mount-shm --mps-container-root {tmp_path} && "
        f"findmnt -n -o FSTYPE,OPTIONS {tmp_path / 'shm'} && "
        # The container path again, from the env var the tests use; MPS_ROOT (a host path) is not for mount-shm.
        f"KUBEGPU_MPS_CONTAINER_ROOT={tmp_path} MPS_ROOT=/run/nvidia/mps {BIN / 'mps-control-daemon'} mount-shm"
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"mounted tmpfs at {tmp_path / 'shm'} (rw,nosuid,nodev,noexec,relatime,size=")
    assert lines[1].split()[0] == "tmpfs" and "nosuid,nodev,noexec" in lines[1]
    assert lines[2] == f"{tmp_path / 'shm'} is already mounted"
