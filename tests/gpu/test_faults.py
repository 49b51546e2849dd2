"""The fault journal: appends are whole lines, readers see each fault once, the fold is the lasting state."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.gpu import errors, faults
from kubegpu.gpu.simulated import SimulatedBackend

fault_strategy = st.builds(
    faults.Fault,
    kind=st.sampled_from(faults.KINDS),
    gpu=st.integers(0, 15),
    xid=st.integers(1, 200),
    mig=st.none() | st.integers(0, 6),
    timestamp=st.floats(1.0, 2e9),
)


@given(fault_strategy)
def test_a_fault_survives_its_json_line(fault: faults.Fault) -> None:
    assert faults.Fault.from_json(fault.to_json()) == fault


def test_reading_from_an_offset_returns_each_fault_once(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    seen, offset = faults.read_from(path, 0)
    assert (seen, offset) == ([], 0)
    faults.append(path, faults.Fault(kind="xid", gpu=1, xid=79))
    faults.append(path, faults.Fault(kind="lost", gpu=2))
    first, offset = faults.read_from(path, offset)
    assert [(f.kind, f.gpu) for f in first] == [("xid", 1), ("lost", 2)]
    again, offset2 = faults.read_from(path, offset)
    assert again == [] and offset2 == offset
    faults.append(path, faults.Fault(kind="recover", gpu=2))
    later, _ = faults.read_from(path, offset)
    assert [f.kind for f in later] == ["recover"]


def test_a_partly_written_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    line = faults.Fault(kind="xid", gpu=0, xid=48).to_json()
    path.write_text(line[:10])
    assert faults.read_from(path, 0) == ([], 0)
    path.write_text(line + "\n")
    seen, offset = faults.read_from(path, 0)
    assert [f.xid for f in seen] == [48] and offset == len(line) + 1


def test_a_truncated_journal_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    for gpu in range(3):
        faults.append(path, faults.Fault(kind="lost", gpu=gpu))
    _, offset = faults.read_from(path, 0)
    path.write_text(faults.Fault(kind="recover", gpu=0).to_json() + "\n")
    seen, _ = faults.read_from(path, offset)
    assert [(f.kind, f.gpu) for f in seen] == [("recover", 0)]


def test_a_bad_line_is_skipped_by_daemons_and_named_by_the_listing(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"kind": "meltdown", "gpu": 1}\n' + faults.Fault(kind="lost", gpu=3).to_json() + "\n")
    seen, _ = faults.read_from(path, 0)
    assert [(f.kind, f.gpu) for f in seen] == [("lost", 3)]
    with pytest.raises(errors.GpuError, match=r"j\.jsonl:1: bad fault line .*unknown fault kind 'meltdown'"):
        faults.read_all(path)


def test_the_fold_keeps_lost_gpus_until_recovered_and_counts_ecc() -> None:
    state = faults.fold(
        [
            faults.Fault(kind="lost", gpu=1),
            faults.Fault(kind="lost", gpu=2),
            faults.Fault(kind="recover", gpu=1),
            faults.Fault(kind="xid", gpu=3, xid=31),
            faults.Fault(kind="xid", gpu=3, xid=79),
            faults.Fault(kind="ecc-dbe", gpu=4),
            faults.Fault(kind="ecc-dbe", gpu=4),
            faults.Fault(kind="ecc-sbe", gpu=4),
        ]
    )
    assert state.lost == {2}
    assert state.last_xid == {3: 79}
    state.apply(faults.Fault(kind="recover", gpu=3))
    assert state.last_xid == {}
    assert state.ecc_dbe == {4: 2} and state.ecc_sbe == {4: 1}


def test_the_default_journal_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(faults.ENV_FAULT_FILE, raising=False)
    assert faults.default_path("dgx-a100").name.startswith("faults-dgx-a100-")
    monkeypatch.setenv(faults.ENV_FAULT_FILE, str(tmp_path / "x.jsonl"))
    assert faults.default_path("dgx-a100") == tmp_path / "x.jsonl"


def test_the_default_journal_is_per_user_machine_and_run_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(faults.ENV_FAULT_FILE, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    here, there = faults.default_path("dgx-a100", tmp_path / "a"), faults.default_path("dgx-a100", tmp_path / "b")
    assert here.parent == there.parent == tmp_path / "kubegpu"
    assert here != there and here.name.startswith("faults-dgx-a100-")
    assert faults.default_path("dgx-a100", tmp_path / "a") == here
    assert faults.default_path("pcie-4xt4", tmp_path / "a") != here
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert faults.journal_dir().name == f"kubegpu-{os.getuid()}"


def test_clear_removes_the_journal_and_telemetry_reads_healthy_again(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    backend = SimulatedBackend("pcie-4xt4", fault_file=path)
    faults.append(path, faults.Fault(kind="lost", gpu=1))
    assert not backend.sample().gpus[1].available
    assert faults.clear(path) and not path.exists()
    assert backend.sample().gpus[1].available
    assert not faults.clear(path)


def fault_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", "fault", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


def test_fault_cli_writes_lists_and_clears_the_journal_of_its_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != faults.ENV_FAULT_FILE} | {"XDG_RUNTIME_DIR": str(tmp_path)}
    (tmp_path / "run1").mkdir()
    (tmp_path / "run2").mkdir()
    assert fault_cli("xid", "--gpu", "2", "--xid", "79", cwd=tmp_path / "run1", env=env).returncode == 0
    assert '"xid": 79' in fault_cli("list", cwd=tmp_path / "run1", env=env).stdout
    assert fault_cli("list", cwd=tmp_path / "run2", env=env).stdout == ""  # another run directory, no faults
    path = fault_cli("path", cwd=tmp_path / "run1", env=env).stdout.strip()
    done = fault_cli("clear", cwd=tmp_path / "run1", env=env)
    assert done.returncode == 0 and done.stdout.strip() == f"cleared {path}" and not Path(path).exists()
    assert fault_cli("clear", cwd=tmp_path / "run1", env=env).stdout.startswith("no journal at ")


@pytest.mark.parametrize("target", ["/proc/kubegpu-faults.jsonl", "."], ids=["proc", "directory"])
def test_an_unwritable_journal_is_one_line_and_exit_2(tmp_path: Path, target: str) -> None:
    done = fault_cli("lost", "--gpu", "1", "--fault-file", target, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 2 and "cannot write the fault journal" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
