"""The fault journal: appends are whole lines, readers see each fault once, the fold is the lasting state."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.gpu import errors, faults

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
    assert faults.default_path("dgx-a100").name == "kubegpu-faults-dgx-a100.jsonl"
    monkeypatch.setenv(faults.ENV_FAULT_FILE, str(tmp_path / "x.jsonl"))
    assert faults.default_path("dgx-a100") == tmp_path / "x.jsonl"
