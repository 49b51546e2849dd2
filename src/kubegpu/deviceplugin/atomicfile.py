"""Replacing a file that other programs read (a container runtime's CDI specs, NFD's feature file) in one rename.

Owns the write: a temporary file in the same directory (hidden, ``.tmp``-suffixed, so
nobody scanning the directory takes it for a spec or a feature file), fsync, mode 0644,
rename over the target; the temporary file is removed when anything fails. Must not
know what the text means or where it goes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (its directory created if missing): readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
