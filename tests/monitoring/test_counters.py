"""The counters file: dcgm-exporter's CSV format, our shipped default, and named errors on bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.monitoring import counters, fields
from tests.monitoring.reference import enabled_counters


def test_the_shipped_default_enables_every_dcgm_exporter_default_counter_with_its_type_and_help() -> None:
    parsed = counters.parse(counters.default_text(), "default")
    by_name = {c.name: c for c in (*parsed.values, *parsed.labels)}
    for row in enabled_counters():
        assert row["field"] in by_name, row["field"]
        assert (by_name[row["field"]].type, by_name[row["field"]].help) == (row["prom_type"], row["help"])
    assert parsed.unsupported == ()


def test_the_shipped_default_adds_only_the_fields_the_alert_rules_need() -> None:
    parsed = counters.parse(counters.default_text(), "default")
    extra = set(parsed.names) - {r["field"] for r in enabled_counters()}
    assert extra == {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}


def test_spaces_around_fields_are_trimmed_like_dcgm_exporter_does() -> None:
    parsed = counters.parse("DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).\n")
    assert parsed.values[0] == counters.Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", 1)


def test_the_file_decides_type_and_help() -> None:
    parsed = counters.parse('DCGM_FI_DEV_GPU_UTIL, counter, "busy, very busy"\n')
    assert (parsed.values[0].type, parsed.values[0].help) == ("counter", "busy, very busy")


def test_comments_and_blank_lines_are_ignored_and_line_numbers_kept() -> None:
    parsed = counters.parse("# a comment\n\n   \nDCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n")
    assert [(c.name, c.line) for c in parsed.values] == [("DCGM_FI_DEV_GPU_TEMP", 4)]
    assert [(c.name, c.line) for c in parsed.labels] == [("DCGM_FI_DRIVER_VERSION", 5)]


@pytest.mark.parametrize(
    "line",
    [
        "DCGM_FI_DEV_FAN_SPEED, gauge, Fan speed",
        "DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window",
        "DCGM_FI_DEV_BRAND, label, Device Brand",
        "DCGM_FI_DEV_GPU_UTIL, histogram, h",
    ],
    ids=["unknown-field", "exporter-synthesised", "unknown-label", "histogram-type"],
)
def test_dcgm_fields_we_cannot_serve_are_reported_as_unsupported_not_fatal(line: str) -> None:
    parsed = counters.parse(f"DCGM_FI_DEV_GPU_TEMP, gauge, t\n{line}\n")
    assert parsed.names == ("DCGM_FI_DEV_GPU_TEMP",)
    assert [c.line for c in parsed.unsupported] == [2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DCGM_FI_DEV_GPU_TEMP, gauge\n", "f.csv:1: expected 3 comma-separated fields"),
        ("DCGM_FI_DEV_GPU_TEMP, gauge, a, b\n", "f.csv:1: expected 3 comma-separated fields"),
        ("\nGPU_TEMP, gauge, t\n", "f.csv:2: 'GPU_TEMP' is not a DCGM field name"),
        ("DCGM_FI_DEV_GPU_TEMP, gauges, t\n", "f.csv:1: DCGM_FI_DEV_GPU_TEMP: unknown metric type 'gauges'"),
        (
            "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n",
            "f.csv:2: DCGM_FI_DEV_GPU_TEMP is already enabled on line 1",
        ),
    ],
    ids=["two-columns", "four-columns", "not-a-dcgm-name", "bad-type", "duplicate"],
)
def test_a_bad_row_is_an_error_naming_file_line_and_problem(text: str, message: str) -> None:
    with pytest.raises(counters.CountersError) as info:
        counters.parse(text, "f.csv")
    assert str(info.value).startswith(message)


_help = st.text(st.characters(codec="utf-8", exclude_characters='\r\n\x00"\x1c\x1d\x1e\x85\u2028\u2029'), max_size=40)


@settings(deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(sorted(fields.FIELDS)), st.sampled_from(["gauge", "counter"]), _help),
        unique_by=lambda r: r[0],
        max_size=10,
    ),
    pad=st.sampled_from(["", " ", "   "]),
)
def test_any_well_formed_file_parses_back_to_its_rows(rows: list[tuple[str, str, str]], pad: str) -> None:
    text = "".join(f'{name}{pad},{pad}{kind},{pad}"{help_text}"\n' for name, kind, help_text in rows)
    parsed = counters.parse(text)
    assert [(c.name, c.type, c.help) for c in parsed.values] == [(n, k, h.strip()) for n, k, h in rows]
