"""The fault journal: how faults reach a simulated machine from outside.

A simulated machine is shared by every process that simulates it (the device
plugin, the exporter), like real hardware is shared by NVML clients. Faults
are appended to a journal file, one JSON object per line; every simulated
backend of that machine tails the file. ``kubegpu fault`` writes it; tests and
the demo call :func:`append` directly.

Owns the journal line format, appending, reading from an offset and folding
the journal into the machine's lasting state (lost GPUs, last XID, ECC counts).
Must not decide device health: that is the device plugin's policy.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kubegpu.gpu import errors

FaultKind = Literal["xid", "ecc-dbe", "ecc-sbe", "lost", "recover"]
KINDS: tuple[FaultKind, ...] = ("xid", "ecc-dbe", "ecc-sbe", "lost", "recover")

#: Environment variable that overrides the default journal location.
ENV_FAULT_FILE = "KUBEGPU_FAULT_FILE"


@dataclass(frozen=True)
class Fault:
    """One injected fault on GPU ``gpu`` (NVML index).

    ``mig`` narrows an XID or ECC fault to one MIG device of that GPU (its
    index among the GPU's MIG devices); None means the whole GPU.
    """

    kind: FaultKind
    gpu: int
    xid: int | None = None
    mig: int | None = None
    timestamp: float = 0.0

    def to_json(self) -> str:
        data: dict[str, object] = {"kind": self.kind, "gpu": self.gpu, "ts": self.timestamp or time.time()}
        if self.xid is not None:
            data["xid"] = self.xid
        if self.mig is not None:
            data["mig"] = self.mig
        return json.dumps(data, sort_keys=True)

    @staticmethod
    def from_json(line: str, where: str = "<journal>") -> Fault:
        try:
            data = json.loads(line)
            kind = data["kind"]
            if kind not in KINDS:
                raise ValueError(f"unknown fault kind {kind!r}")
            xid = data.get("xid")
            if kind == "xid" and not isinstance(xid, int):
                raise ValueError("an xid fault needs an integer 'xid'")
            return Fault(
                kind=kind,
                gpu=int(data["gpu"]),
                xid=None if xid is None else int(xid),
                mig=None if data.get("mig") is None else int(data["mig"]),
                timestamp=float(data.get("ts", 0.0)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.GpuError(f"{where}: bad fault line {line.strip()!r}: {exc}") from exc


def journal_dir() -> Path:
    """This user's directory for fault journals: ``$XDG_RUNTIME_DIR/kubegpu``, else ``<tmp>/kubegpu-<uid>``.

    Per user, so two users of one machine never share (or fail to write) a journal; the runtime dir is
    also emptied at logout, so faults do not outlive the session.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "kubegpu"
    import tempfile  # here: a plugin given --fault-file never pays for tempfile (and the shutil it imports)

    return Path(tempfile.gettempdir()) / f"kubegpu-{os.getuid()}"


def default_path(machine: str, run_dir: Path | None = None) -> Path:
    """Where the journal of simulated machine ``machine`` lives unless told otherwise.

    ``$KUBEGPU_FAULT_FILE`` if set; else one journal per user (:func:`journal_dir`), machine and run
    directory (the working directory by default), so runs started in different directories never see
    each other's faults. ``kubegpu fault`` run from the same directory finds the same journal.
    """
    override = os.environ.get(ENV_FAULT_FILE)
    if override:
        return Path(override)
    import hashlib

    where = str((run_dir or Path.cwd()).absolute())
    tag = hashlib.sha256(where.encode()).hexdigest()[:12]
    return journal_dir() / f"faults-{machine}-{tag}.jsonl"


def append(path: Path, fault: Fault) -> None:
    """Append one fault; a single ``write`` with O_APPEND so concurrent writers never interleave."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = (fault.to_json() + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_from(path: Path, offset: int, end: int | None = None) -> tuple[list[Fault], int]:
    """Faults written after byte ``offset`` (up to byte ``end`` when given), and the offset to read from next.

    A partly written last line is left for the next read. A journal that shrank
    (truncated or replaced) is read again from the start. Bad lines are skipped
    (a daemon must not die on one), and reported by :func:`read_all` instead.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return [], 0
    if size < offset:
        offset = 0
    if end is not None:
        size = min(size, end)
    if size == offset:
        return [], offset
    with path.open("rb") as fh:
        fh.seek(offset)
        chunk = fh.read(size - offset)
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    faults = []
    for line in chunk[: end + 1].decode(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            faults.append(Fault.from_json(line, str(path)))
        except errors.GpuError:
            continue
    return faults, offset + end + 1


def read_all(path: Path) -> list[Fault]:
    """Every fault in the journal; raises :class:`~kubegpu.gpu.errors.GpuError` on a malformed or unreadable file."""
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise errors.GpuError(f"{path}: not a fault journal (not UTF-8 text)") from None
    except OSError as exc:
        raise errors.GpuError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return [Fault.from_json(line, f"{path}:{n}") for n, line in enumerate(text.splitlines(), 1) if line]


def clear(path: Path) -> bool:
    """Remove the journal, for a fresh run; returns whether there was one.

    Telemetry of running backends reads healthy again at once (it folds the whole journal each sample);
    tailing health-event readers see nothing new: removal is not a recovery event.
    """
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


@dataclass
class MachineState:
    """What the journal says about the machine right now (a fold over its faults)."""

    lost: set[int] = field(default_factory=set)
    last_xid: dict[int, int] = field(default_factory=dict)
    ecc_sbe: dict[int, int] = field(default_factory=dict)
    ecc_dbe: dict[int, int] = field(default_factory=dict)

    def apply(self, fault: Fault) -> None:
        if fault.kind == "lost":
            self.lost.add(fault.gpu)
        elif fault.kind == "recover":
            # Recovery stands for a GPU reset: the driver forgets the GPU's last XID too.
            self.lost.discard(fault.gpu)
            self.last_xid.pop(fault.gpu, None)
        elif fault.kind == "xid" and fault.xid is not None:
            self.last_xid[fault.gpu] = fault.xid
        elif fault.kind == "ecc-sbe":
            self.ecc_sbe[fault.gpu] = self.ecc_sbe.get(fault.gpu, 0) + 1
        elif fault.kind == "ecc-dbe":
            self.ecc_dbe[fault.gpu] = self.ecc_dbe.get(fault.gpu, 0) + 1


def fold(faults: Iterable[Fault], state: MachineState | None = None) -> MachineState:
    """Apply ``faults`` in order to ``state`` (a fresh one by default)."""
    state = state or MachineState()
    for fault in faults:
        state.apply(fault)
    return state
