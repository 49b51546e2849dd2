"""Health policy: NVIDIA's XID env-var semantics (and where we differ), verdicts, and which devices an event hits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin.rm import resource_map, xids
from kubegpu.gpu.backend import HealthEvent, HealthEventKind
from tests.deviceplugin.fixtures import build

# (disable, enable, fatal XIDs, non-fatal XIDs, checks on (ours), checks on (NVIDIA))
MATRIX = [
    ("empty_env_ignores_the_application_xids", None, None, [555, 79, 48], [13, 31, 43, 45, 68, 109], True, True),
    ("disable_all_turns_checks_off", "all", None, [], [79, 48, 13], False, False),
    ("disable_xids_is_the_same_as_all", "xids", None, [], [79, 48], False, False),
    ("enable_all_makes_application_xids_fatal", None, "all", [13, 31, 43, 45, 68, 109, 79], [], True, True),
    ("enable_overrides_disable_of_the_same_xid", "11", "11", [11], [], True, True),
    ("disable_list_adds_to_the_builtin_list", "79,48", None, [94], [79, 48, 13], True, True),
    ("enable_overrides_the_builtin_list", None, "13", [13], [31], True, True),
    # NVIDIA short-circuits on disable=all and never checks; we honour the explicit enable list.
    ("explicit_enable_honoured_with_disable_all", "all", "48", [48], [79, 13], True, False),
    ("case_and_spaces_are_ignored", " ALL ", None, [], [79], False, False),
]


@pytest.mark.parametrize(
    ("disable", "enable", "fatal", "ignored", "checks", "nvidia_checks"),
    [row[1:] for row in MATRIX],
    ids=[row[0] for row in MATRIX],
)
def test_xid_policy_matrix(
    disable: str | None,
    enable: str | None,
    fatal: list[int],
    ignored: list[int],
    checks: bool,
    nvidia_checks: bool,
) -> None:
    env = {k: v for k, v in ((xids.ENV_DISABLE, disable), (xids.ENV_ENABLE, enable)) if v is not None}
    policy = xids.policy_from_env(env)
    assert [x for x in fatal if policy.is_fatal(x)] == fatal
    assert [x for x in ignored if not policy.is_fatal(x)] == ignored
    assert policy.checks_enabled is checks
    assert policy.nvidia_checks_enabled is nvidia_checks


@pytest.mark.parametrize(
    ("text", "expected", "invalid"),
    [
        ("68,not-an-int,67", {67, 68}, ("not-an-int",)),
        ("-68", set(), ("-68",)),
        ("", set(), ()),
        (" 79 , ,48", {48, 79}, ()),
    ],
    ids=["bad_entries_skipped", "negative_rejected", "empty", "whitespace_and_empty_entries"],
)
def test_xid_lists_parse_like_nvidia(text: str, expected: set[int], invalid: tuple[str, ...]) -> None:
    parsed = xids.parse_xids(text)
    assert parsed.xids == expected
    assert parsed.invalid == invalid


def test_invalid_entries_are_kept_for_the_log_line() -> None:
    policy = xids.policy_from_env({xids.ENV_DISABLE: "x1", xids.ENV_ENABLE: "y2"})
    assert policy.invalid == ("x1", "y2")


def event(kind: HealthEventKind, xid: int | None = None) -> HealthEvent:
    return HealthEvent(kind=kind, gpu_uuid="GPU-x", xid=xid)


VERDICTS = [
    ("fatal_xid", event(HealthEventKind.XID, 79), xids.Verdict.UNHEALTHY, "XID 79 (GPU has fallen off the bus)"),
    ("application_xid", event(HealthEventKind.XID, 13), xids.Verdict.IGNORE, "not fatal"),
    (
        "double_bit_ecc_is_unhealthy_unlike_nvidia",
        event(HealthEventKind.ECC_DBE),
        xids.Verdict.UNHEALTHY,
        "double-bit ECC",
    ),
    ("single_bit_ecc_is_log_only", event(HealthEventKind.ECC_SBE), xids.Verdict.IGNORE, "logged only"),
    ("xid_without_number", event(HealthEventKind.XID), xids.Verdict.IGNORE, "without an XID number"),
    ("lost_gpu", event(HealthEventKind.LOST), xids.Verdict.UNHEALTHY, "lost"),
    ("wait_error", event(HealthEventKind.WAIT_ERROR), xids.Verdict.UNHEALTHY, "wait failed"),
    ("recovered", event(HealthEventKind.RECOVERED), xids.Verdict.HEALTHY, "recovered"),
]


@pytest.mark.parametrize(("ev", "verdict", "reason"), [row[1:] for row in VERDICTS], ids=[row[0] for row in VERDICTS])
def test_verdicts(ev: HealthEvent, verdict: xids.Verdict, reason: str) -> None:
    decision = xids.decide(ev, xids.XidPolicy())
    assert decision.verdict is verdict
    assert reason in decision.reason


@pytest.mark.parametrize(
    "kind", [HealthEventKind.XID, HealthEventKind.LOST, HealthEventKind.ECC_DBE, HealthEventKind.WAIT_ERROR]
)
def test_every_event_but_recovery_is_ignored_when_checks_are_off(kind: HealthEventKind) -> None:
    policy = xids.policy_from_env({xids.ENV_DISABLE: "all"})
    decision = xids.decide(event(kind, 79 if kind is HealthEventKind.XID else None), policy)
    assert decision.verdict is xids.Verdict.IGNORE
    assert "health checks disabled" in decision.reason
    assert xids.decide(event(HealthEventKind.RECOVERED), policy).verdict is xids.Verdict.HEALTHY


def test_meanings_for_log_lines() -> None:
    assert xids.describe(48) == "48 (double-bit ECC error)"
    assert xids.meaning(99999) == "unknown XID"


# --- which devices an event hits ------------------------------------------------------------


def test_an_event_on_a_gpu_marks_every_replica_of_it() -> None:
    text = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}"
    resource = resource_map.build(build.profile("dgx-a100"), build.plugin_config(text=text))["nvidia.com/gpu"]
    gpu2 = build.profile("dgx-a100").gpus[2].uuid
    hit = xids.affected(resource.devices, gpu2)
    # NVIDIA (#1929) marks only one of the four.
    assert [d.id for d in hit] == [f"{gpu2}::{n}" for n in range(4)]


def test_an_event_on_a_mig_enabled_gpu_marks_every_mig_device_on_it() -> None:
    machine = build.profile("a100-mig")
    resource = resource_map.build(machine, build.plugin_config(["--mig-strategy", "mixed"]))["nvidia.com/mig-1g.10gb"]
    hit = xids.affected(resource.devices, machine.gpus[2].uuid)
    assert [d.id for d in hit] == [m.uuid for m in machine.gpus[2].mig_devices]


def test_a_mig_scoped_event_marks_only_the_matching_mig_device() -> None:
    machine = build.profile("a100-mig")
    resource = resource_map.build(machine, build.plugin_config(["--mig-strategy", "mixed"]))["nvidia.com/mig-1g.10gb"]
    target = machine.gpus[3].mig_devices[4]
    hit = xids.affected(resource.devices, machine.gpus[3].uuid, target.gi_id, target.ci_id)
    assert [d.id for d in hit] == [target.uuid]


def test_a_mig_scoped_event_marks_the_whole_gpu_that_contains_it() -> None:
    machine = build.profile("a100-mig")
    resource = resource_map.build(machine, build.plugin_config())["nvidia.com/gpu"]
    target = machine.gpus[5].mig_devices[1]
    hit = xids.affected(resource.devices, machine.gpus[5].uuid, target.gi_id, target.ci_id)
    assert [d.id for d in hit] == [machine.gpus[5].uuid]


def test_an_event_without_a_gpu_marks_everything() -> None:
    resource = resource_map.build(build.profile("pcie-4xt4"), build.plugin_config())["nvidia.com/gpu"]
    assert xids.affected(resource.devices, None) == list(resource.devices)


@given(st.integers(0, 7), st.integers(2, 6))
def test_every_device_hit_is_on_the_failing_gpu_and_every_device_on_it_is_hit(gpu: int, replicas: int) -> None:
    machine = build.profile("dgx-a100")
    text = f"sharing: {{timeSlicing: {{resources: [{{name: gpu, replicas: {replicas}}}]}}}}"
    devices = resource_map.build(machine, build.plugin_config(text=text))["nvidia.com/gpu"].devices
    hit = xids.affected(devices, machine.gpus[gpu].uuid)
    assert {d.gpu_index for d in hit} == {gpu}
    assert len(hit) == replicas
