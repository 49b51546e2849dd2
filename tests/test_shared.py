"""Tests needing ../shared: skipped with the missing path named outside CI, failed in CI; other skips untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import shared

INNER = """
import pytest
from pathlib import Path
from tests.shared import missing, needs

ROOT = Path(__file__).parent / "fake-shared"

def test_needs_a_missing_file():
    reason = missing("traces", "nowhere.csv", root=ROOT)
    if reason:
        pytest.skip(reason)

@needs("reference", "t.tsv", root=ROOT)
def test_marked_as_needing_a_missing_file():
    pass

def test_present_file_is_used():
    assert missing("present.txt", root=ROOT) is None

def test_an_unrelated_skip():
    pytest.skip("promtool is not installed")
"""


def run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None) -> pytest.RunResult:
    (pytester.path / "fake-shared").mkdir()
    (pytester.path / "fake-shared" / "present.txt").write_text("x")
    pytester.makepyfile(test_inner=INNER)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    return pytester.runpytest_subprocess("-p", "tests.shared", "-rfs", "-p", "no:cacheprovider")


def test_outside_ci_missing_shared_material_is_a_skip_naming_the_path(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(shared.REPO))
    result = run_inner(pytester, monkeypatch, None)
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*needs ../shared: traces/nowhere.csv not found (looked at */fake-shared/traces/*"])


@pytest.mark.parametrize("ci", ["true", "1"])
def test_in_ci_missing_shared_material_fails_but_other_skips_stay_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(shared.REPO))
    result = run_inner(pytester, monkeypatch, ci)
    result.assert_outcomes(passed=1, skipped=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*CI is set, so ../shared must be present: needs ../shared: reference/t.tsv*",
            "*CI is set, so ../shared must be present: needs ../shared: traces/nowhere.csv*",
        ]
    )
    assert result.ret == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("false", False), ("0", False), ("true", True), ("1", True), ("TRUE", True)],
)
def test_ci_is_recognised_from_the_environment(value: str | None, expected: bool) -> None:
    assert shared.in_ci({} if value is None else {"CI": value}) is expected


def test_present_material_has_no_skip_reason(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert shared.missing("a", root=tmp_path) is None
    expected = f"needs ../shared: a/b not found (looked at {tmp_path / 'a' / 'b'})"
    assert shared.missing("a", "b", root=tmp_path) == expected
