"""Health state: which events make which devices Unhealthy, and how they heal (recovery, quiet period)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin.config import flags
from kubegpu.deviceplugin.naming import replica_id
from kubegpu.deviceplugin.rm import health, xids
from kubegpu.deviceplugin.rm.devices import Device
from kubegpu.gpu.backend import HealthEvent, HealthEventKind

K = HealthEventKind

WHOLE = [Device(id=f"GPU-{n}", gpu_uuid=f"GPU-{n}", gpu_index=n, index=str(n), numa=0) for n in range(3)]
REPLICAS = [
    Device(id=replica_id("GPU-0", r), gpu_uuid="GPU-0", gpu_index=0, index="0", numa=0, replica=r) for r in range(4)
]
MIGS = [
    Device(id=f"MIG-{gi}", gpu_uuid="GPU-1", gpu_index=1, index=f"1:{n}", numa=0, mig=(gi, 0))
    for n, gi in enumerate((1, 2, 3))
]
EVERYTHING = WHOLE + REPLICAS + MIGS


def book(quiet: float | None = 10.0) -> health.HealthBook:
    return health.HealthBook(quiet_period_s=quiet)


def unhealthy(b: health.HealthBook) -> set[str]:
    return set(b.unhealthy(EVERYTHING))


def xid(gpu: str | None, number: int, mig: tuple[int, int] | None = None) -> HealthEvent:
    gi, ci = mig if mig else (None, None)
    return HealthEvent(K.XID, gpu, xid=number, gi_id=gi, ci_id=ci)


@pytest.mark.parametrize("number", sorted(xids.APPLICATION_XIDS))
def test_application_xids_change_nothing(number: int) -> None:
    b = book()
    assert not b.apply(xid("GPU-0", number), 0.0)
    assert unhealthy(b) == set()


@pytest.mark.parametrize("number", [48, 63, 74, 79, 94, 95, 119, 555])
def test_critical_xids_mark_every_device_on_the_gpu(number: int) -> None:
    b = book()
    assert b.apply(xid("GPU-0", number), 0.0)
    assert unhealthy(b) == {"GPU-0"} | {d.id for d in REPLICAS}


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (HealthEvent(K.ECC_DBE, "GPU-2"), {"GPU-2"}),
        (HealthEvent(K.ECC_SBE, "GPU-2"), set()),
        (HealthEvent(K.LOST, "GPU-2"), {"GPU-2"}),
        (HealthEvent(K.WAIT_ERROR, None), {d.id for d in EVERYTHING}),
        (HealthEvent(K.WAIT_ERROR, "GPU-2"), {d.id for d in EVERYTHING}),
        (xid("GPU-1", 79), {"GPU-1", "MIG-1", "MIG-2", "MIG-3"}),
        (xid("GPU-1", 79, mig=(2, 0)), {"GPU-1", "MIG-2"}),
        (xid("GPU-9", 79), set()),
        (HealthEvent(K.XID, "GPU-2", xid=None), set()),
    ],
    ids=[
        "ecc-double-bit",
        "ecc-single-bit-is-corrected",
        "lost",
        "wait-error-marks-all",
        "wait-error-with-gpu-still-marks-all",
        "gpu-fault-marks-every-mig-device",
        "mig-fault-marks-that-mig-and-the-whole-gpu-only",
        "unknown-gpu-ignored",
        "xid-without-number-ignored",
    ],
)
def test_event_marks_exactly_these_devices(event: HealthEvent, expected: set[str]) -> None:
    b = book()
    b.apply(event, 0.0)
    assert unhealthy(b) == expected


def test_recovered_event_clears_every_fault_of_that_gpu_only() -> None:
    b = book(quiet=None)
    b.apply(xid("GPU-1", 79, mig=(1, 0)), 0.0)
    b.apply(HealthEvent(K.LOST, "GPU-1"), 1.0)
    b.apply(xid("GPU-2", 48), 2.0)
    assert b.apply(HealthEvent(K.RECOVERED, "GPU-1"), 3.0)
    assert unhealthy(b) == {"GPU-2"}
    assert not b.apply(HealthEvent(K.RECOVERED, "GPU-1"), 4.0)


def test_recovered_without_gpu_clears_everything() -> None:
    b = book(quiet=None)
    b.apply(HealthEvent(K.WAIT_ERROR, None), 0.0)
    b.apply(HealthEvent(K.LOST, "GPU-0"), 0.0)
    b.apply(HealthEvent(K.RECOVERED, None), 1.0)
    assert unhealthy(b) == set()


def test_a_transient_fault_heals_after_exactly_the_quiet_period() -> None:
    b = book(quiet=10.0)
    b.apply(xid("GPU-0", 94), 100.0)
    assert b.next_expiry() == 110.0
    assert b.expire(109.999) == []
    assert "GPU-0" in unhealthy(b)
    assert b.expire(110.0) == [health.Target("GPU-0")]
    assert unhealthy(b) == set()
    assert b.next_expiry() is None


def test_a_new_fault_restarts_the_quiet_period_but_keeps_since() -> None:
    b = book(quiet=10.0)
    b.apply(xid("GPU-0", 94), 100.0)
    b.apply(xid("GPU-0", 48), 108.0)
    assert b.expire(110.0) == []
    fault = b.fault_of(WHOLE[0])
    assert fault is not None and (fault.since, fault.last, fault.xid) == (100.0, 108.0, 48)
    assert b.expire(118.0) == [health.Target("GPU-0")]


def test_a_lost_gpu_never_heals_by_waiting_even_when_it_reports_xids() -> None:
    b = book(quiet=1.0)
    b.apply(HealthEvent(K.LOST, "GPU-0"), 0.0)
    b.apply(xid("GPU-0", 79), 5.0)
    assert b.next_expiry() is None
    assert b.expire(1e9) == []
    fault = b.fault_of(WHOLE[0])
    assert fault is not None and fault.kind is K.LOST and fault.last == 5.0


@pytest.mark.parametrize("quiet", [None, 0.0], ids=["none", "zero"])
def test_without_quiet_period_only_recovery_heals(quiet: float | None) -> None:
    b = book(quiet=quiet)
    b.apply(xid("GPU-0", 79), 0.0)
    assert b.next_expiry() is None
    assert b.expire(1e9) == []
    assert "GPU-0" in unhealthy(b)


def test_the_env_xid_policy_decides_which_xids_count() -> None:
    policy = xids.policy_from_env({xids.ENV_DISABLE: "79", xids.ENV_ENABLE: "13"})
    b = health.HealthBook(policy=policy)
    b.apply(xid("GPU-0", 79), 0.0)
    assert unhealthy(b) == set()
    b.apply(xid("GPU-0", 13), 0.0)
    assert "GPU-0" in unhealthy(b)


def test_with_health_checks_disabled_nothing_but_recovery_counts() -> None:
    b = health.HealthBook(policy=xids.policy_from_env({xids.ENV_DISABLE: "all"}))
    for event in (xid("GPU-0", 79), HealthEvent(K.LOST, "GPU-0"), HealthEvent(K.ECC_DBE, "GPU-0")):
        assert not b.apply(event, 0.0)
    assert unhealthy(b) == set()


def test_a_mig_fault_without_a_compute_instance_marks_every_ci_of_that_gpu_instance() -> None:
    devices = [*MIGS, Device(id="MIG-2b", gpu_uuid="GPU-1", gpu_index=1, index="1:9", numa=0, mig=(2, 1))]
    b = book()
    b.apply(HealthEvent(K.XID, "GPU-1", xid=79, gi_id=2, ci_id=None), 0.0)
    assert set(b.unhealthy(devices)) == {"MIG-2", "MIG-2b"}


def test_the_fault_of_a_device_is_its_earliest() -> None:
    b = book()
    b.apply(xid("GPU-1", 79, mig=(2, 0)), 1.0)
    b.apply(HealthEvent(K.ECC_DBE, "GPU-1"), 2.0)
    mig_fault = b.fault_of(MIGS[1])
    assert mig_fault is not None and mig_fault.xid == 79
    sibling = b.fault_of(MIGS[0])
    assert sibling is not None and sibling.kind is K.ECC_DBE


_gpus = st.sampled_from(["GPU-0", "GPU-1", "GPU-2", None])
_events = st.one_of(
    st.builds(lambda g, n: xid(g, n), _gpus, st.sampled_from([13, 31, 48, 79, 94])),
    st.builds(lambda g, m: xid(g, 79, mig=m), _gpus, st.sampled_from([(1, 0), (2, 0), (9, 0)])),
    st.builds(HealthEvent, st.sampled_from(list(K)), _gpus),
)


@given(st.lists(st.tuples(_events, st.floats(0, 5)), max_size=30), st.floats(0.1, 10))
def test_health_book_invariants_over_any_event_sequence(steps: list[tuple[HealthEvent, float]], quiet: float) -> None:
    b = book(quiet=quiet)
    now = 0.0
    for event, dt in steps:
        now += dt
        b.apply(event, now)
        b.expire(now)
        # every held fault covers what it says, and transient ones are younger than the quiet period
        for fault in b.faults.values():
            assert fault.since <= fault.last <= now
            assert fault.lasting or fault.last + quiet > now
        expiry = b.next_expiry()
        assert expiry is None or expiry > now
    lost = {t for t, f in b.faults.items() if f.lasting}
    b.expire(now + quiet)
    assert {t for t in b.faults} == lost
    b.apply(HealthEvent(K.RECOVERED, None), now + quiet)
    assert unhealthy(b) == set()


def test_by_default_no_fault_heals_by_waiting_as_with_nvidia() -> None:
    b = health.HealthBook()
    for event in (xid("GPU-0", 79), xid("GPU-1", 48), HealthEvent(K.ECC_DBE, "GPU-0"), xid("GPU-1", 94)):
        b.apply(event, 0.0)
    assert b.next_expiry() is None and b.expire(1e12) == []
    assert {"GPU-0", "GPU-1"} <= unhealthy(b)
    b.apply(HealthEvent(K.RECOVERED, "GPU-0"), 1.0)  # the operator acts
    assert "GPU-0" not in unhealthy(b) and "GPU-1" in unhealthy(b)


@pytest.mark.parametrize(
    ("classes", "event", "heals"),
    [
        ("all", xid("GPU-0", 94), True),
        ("94,95", xid("GPU-0", 94), True),
        ("94,95", xid("GPU-0", 48), False),
        ("48", HealthEvent(K.ECC_DBE, "GPU-0"), True),
        ("ecc", HealthEvent(K.ECC_DBE, "GPU-0"), True),
        ("94", HealthEvent(K.ECC_DBE, "GPU-0"), False),
        ("wait", HealthEvent(K.WAIT_ERROR, None), True),
        ("ecc,94", HealthEvent(K.WAIT_ERROR, None), False),
        ("all", HealthEvent(K.LOST, "GPU-0"), False),
        ("all", xid("GPU-0", 79), False),
        ("79", HealthEvent(K.LOST, "GPU-0"), False),
    ],
    ids=["all", "listed-xid", "unlisted-xid", "dbe-as-xid-48", "dbe-as-ecc", "dbe-unlisted", "wait", "wait-unlisted",
         "lost-never", "xid-79-never", "lost-never-even-listed"],
)  # fmt: skip
def test_the_quiet_period_heals_only_the_classes_opted_in(classes: str, event: HealthEvent, heals: bool) -> None:
    b = health.HealthBook(quiet_period_s=10.0, recoverable=flags.recovery_classes(classes))
    b.apply(event, 0.0)
    assert b.next_expiry() == (10.0 if heals else None)
    assert bool(b.expire(10.0)) is heals


@pytest.mark.parametrize("text", ["79,lots", "-1", "xid79", "ECC"])
def test_unknown_recovery_classes_are_errors(text: str) -> None:
    with pytest.raises(ValueError, match="is not an XID number, ecc, wait or all"):
        flags.recovery_classes(text)
