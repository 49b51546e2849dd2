"""Rendering: dcgm-exporter's series layout, labels and values from a simulated machine's sample."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.gpu import faults, profiles
from kubegpu.gpu.model import Machine
from kubegpu.gpu.simulated import SimulatedBackend
from kubegpu.gpu.telemetry import MachineSample
from kubegpu.monitoring import attribution, counters, options, render
from kubegpu.monitoring.attribution import Attribution, PodRef
from tests.monitoring import exposition
from tests.monitoring.reference import enabled_counters

DEFAULT = counters.parse(counters.default_text())
OPTIONS = render.LabelOptions(hostname="node-1")
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
NOW = 1_800_000_000.0


def sample_of(machine_name: str, tmp_path: Path) -> tuple[Machine, MachineSample]:
    backend = SimulatedBackend(machine_name, fault_file=tmp_path / "faults.jsonl", clock=lambda: NOW)
    return backend.discover(), backend.sample()


def rendered(
    machine: Machine,
    sample: MachineSample,
    holders: Attribution = attribution.EMPTY,
    options: render.LabelOptions = OPTIONS,
    counter_set: counters.CounterSet = DEFAULT,
) -> exposition.Exposition:
    ents = render.entities(machine, counter_set, options)
    return exposition.parse(render.render_sample(ents, counter_set, sample, holders))


def test_every_enabled_default_counter_has_one_series_per_gpu_with_dcgm_labels_in_order(tmp_path: Path) -> None:
    machine, sample = sample_of("dgx-a100", tmp_path)
    out = rendered(machine, sample)
    for row in enabled_counters():
        if row["prom_type"] == "label":
            continue
        series = out.named(row["field"])
        assert sorted(s.labels["gpu"] for s in series) == [str(i) for i in range(8)], row["field"]
        assert out.types[row["field"]] == row["prom_type"]
        assert out.helps[row["field"]] == row["help"]
        assert all(s.label_order == GPU_LABELS for s in series)
    gpu3 = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "3")
    assert gpu3.labels == {
        "gpu": "3",
        "UUID": machine.gpus[3].uuid,
        "pci_bus_id": machine.gpus[3].pci_bus_id,
        "device": "nvidia3",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": "node-1",
        "DCGM_FI_DRIVER_VERSION": machine.driver_version,
    }
    assert gpu3.value == sample.gpus[3].gpu_temp_c


@pytest.mark.parametrize(
    ("metric", "attr"),
    [
        ("DCGM_FI_DEV_GPU_UTIL", "gpu_util_pct"),
        ("DCGM_FI_DEV_FB_USED", "fb_used_mib"),
        ("DCGM_FI_DEV_POWER_USAGE", "power_w"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "total_energy_mj"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_s"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active"),
        ("DCGM_FI_DEV_XID_ERRORS", "xid_last"),
    ],
    ids=["util", "fb-used", "power", "energy", "pcie-tx", "dram-active", "xid"],
)
def test_values_are_the_samples_values(tmp_path: Path, metric: str, attr: str) -> None:
    machine, sample = sample_of("dgx-a100", tmp_path)
    out = rendered(machine, sample)
    assert {s.labels["gpu"]: s.value for s in out.named(metric)} == {
        str(g.index): float(getattr(g, attr)) for g in sample.gpus
    }


def test_an_injected_xid_shows_in_xid_errors(tmp_path: Path) -> None:
    faults.append(tmp_path / "faults.jsonl", faults.Fault(kind="xid", gpu=5, xid=79))
    machine, sample = sample_of("dgx-a100", tmp_path)
    out = rendered(machine, sample)
    assert {s.labels["gpu"]: s.value for s in out.named("DCGM_FI_DEV_XID_ERRORS") if s.value} == {"5": 79.0}


def test_mig_devices_get_their_own_series_with_instance_labels_and_values(tmp_path: Path) -> None:
    machine, sample = sample_of("a100-mig", tmp_path)
    out = rendered(machine, sample)
    used = out.named("DCGM_FI_DEV_FB_USED")
    # GPUs 0-1 whole, then 7 + 7 + 4 + 2 + 2 + 1 MIG devices
    assert len(used) == 2 + 23
    mig = machine.gpus[4].mig_devices[1]
    mig_sample = next(m for m in sample.gpus[4].mig if m.uuid == mig.uuid)
    series = [s for s in used if s.labels["gpu"] == "4" and s.labels.get("GPU_I_ID") == str(mig.gi_id)]
    assert len(series) == 1
    assert series[0].value == mig_sample.fb_used_mib
    assert series[0].labels["GPU_I_PROFILE"] == "2g.20gb"
    assert series[0].labels["UUID"] == machine.gpus[4].uuid  # the parent's, as dcgm-exporter labels MIG series
    assert series[0].label_order == (*GPU_LABELS[:5], "GPU_I_PROFILE", "GPU_I_ID", *GPU_LABELS[5:])


def test_mig_devices_repeat_device_values_and_leave_out_whole_gpu_utilisation(tmp_path: Path) -> None:
    machine, sample = sample_of("a100-mig", tmp_path)
    out = rendered(machine, sample)
    temps = [s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "2"]
    assert len(temps) == 7
    assert {s.value for s in temps} == {sample.gpus[2].gpu_temp_c}
    assert {s.labels["gpu"] for s in out.named("DCGM_FI_DEV_GPU_UTIL")} == {"0", "1"}
    assert {s.labels["gpu"] for s in out.named("DCGM_FI_DEV_FB_RESERVED")} == {"0", "1"}


def test_pod_labels_go_on_the_held_gpus_only_one_series_per_holding_container(tmp_path: Path) -> None:
    machine, sample = sample_of("dgx-a100", tmp_path)
    g1, g2 = machine.gpus[1].uuid, machine.gpus[2].uuid
    holders = Attribution(
        holders={g1: (PodRef("team-a", "train", "main"),), g2: (PodRef("team-a", "a", "c"), PodRef("team-b", "b", "c"))}
    )
    out = rendered(machine, sample, holders)
    temps = out.named("DCGM_FI_DEV_GPU_TEMP")
    by_gpu: dict[str, list[dict[str, str]]] = {}
    for s in temps:
        by_gpu.setdefault(s.labels["gpu"], []).append(s.labels)
    assert len(temps) == 9
    assert [(x["namespace"], x["pod"], x["container"]) for x in by_gpu["1"]] == [("team-a", "train", "main")]
    assert [(x["namespace"], x["pod"]) for x in by_gpu["2"]] == [("team-a", "a"), ("team-b", "b")]
    assert by_gpu["1"][0].keys() >= {"pod", "namespace", "container"}
    for gpu in ("0", "3", "4", "5", "6", "7"):
        assert len(by_gpu[gpu]) == 1 and "pod" not in by_gpu[gpu][0]
    held = next(s for s in temps if s.labels["gpu"] == "1")
    assert held.label_order == (*GPU_LABELS, "container", "namespace", "pod")


def test_a_mig_series_carries_the_pod_of_that_mig_device(tmp_path: Path) -> None:
    machine, sample = sample_of("a100-mig", tmp_path)
    mig = machine.gpus[3].mig_devices[6]
    out = rendered(machine, sample, Attribution(holders={mig.uuid: (PodRef("ns", "infer", "srv"),)}))
    labelled = [s for s in out.named("DCGM_FI_DEV_FB_USED") if "pod" in s.labels]
    assert [(s.labels["gpu"], s.labels["GPU_I_ID"], s.labels["pod"]) for s in labelled] == [
        ("3", str(mig.gi_id), "infer")
    ]


def test_a_lost_gpu_has_no_dcgm_series_and_is_marked_unavailable(tmp_path: Path) -> None:
    faults.append(tmp_path / "faults.jsonl", faults.Fault(kind="lost", gpu=6))
    machine, sample = sample_of("dgx-a100", tmp_path)
    out = rendered(machine, sample)
    assert {s.labels["gpu"] for s in out.named("DCGM_FI_DEV_GPU_TEMP")} == {"0", "1", "2", "3", "4", "5", "7"}
    available = {s.labels["gpu"]: s.value for s in out.named(render.GPU_AVAILABLE)}
    assert available == {str(i): (0.0 if i == 6 else 1.0) for i in range(8)}


@pytest.mark.parametrize(
    ("options", "present", "absent"),
    [
        (render.LabelOptions(hostname="n"), "Hostname", "hostname"),
        (render.LabelOptions(hostname_label="hostname", hostname="n"), "hostname", "Hostname"),
        (render.LabelOptions(hostname_label=None), None, "Hostname"),
    ],
    ids=["released-4x", "main", "no-hostname"],
)
def test_hostname_label_spelling_is_configurable(
    tmp_path: Path, options: render.LabelOptions, present: str | None, absent: str
) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    labels = rendered(machine, sample, options=options).named("DCGM_FI_DEV_GPU_TEMP")[0].labels
    assert absent not in labels
    if present:
        assert labels[present] == "n"


def test_blanks_in_the_model_name_can_be_replaced(tmp_path: Path) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    options = render.LabelOptions(replace_blanks_in_model_name=True)
    assert rendered(machine, sample, options=options).named("DCGM_FI_DEV_GPU_TEMP")[0].labels["modelName"] == (
        "Tesla-T4"
    )


def test_a_field_the_backend_cannot_read_is_left_out_not_zero(tmp_path: Path) -> None:
    machine, sample = sample_of("dgx-a100", tmp_path)
    sample = replace(sample, gpus=tuple(replace(g, memory_temp_c=None) for g in sample.gpus))
    out = rendered(machine, sample)
    assert out.named("DCGM_FI_DEV_MEMORY_TEMP") == []
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in out.types


_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)  # utf-8: no lone surrogates


_T4 = profiles.load("pcie-4xt4")
_T4_SAMPLE = SimulatedBackend(_T4, fault_file=Path("/nonexistent/faults.jsonl"), clock=lambda: NOW).sample()


@settings(deadline=None)
@given(pod=_names, namespace=_names, container=_names)
def test_any_pod_name_survives_escaping(pod: str, namespace: str, container: str) -> None:
    machine, sample = _T4, _T4_SAMPLE
    out = rendered(machine, sample, Attribution(holders={machine.gpus[0].uuid: (PodRef(namespace, pod, container),)}))
    held = [s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if "pod" in s.labels]
    assert [(s.labels["pod"], s.labels["namespace"], s.labels["container"]) for s in held] == [
        (pod, namespace, container)
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (79, "79"),
        (42.0, "42"),
        (0.25, "0.25"),
        (1e20, "1e+20"),
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (-3.5, "-3.5"),
    ],
    ids=["zero", "int", "integral-float", "fraction", "huge", "nan", "inf", "minus-inf", "negative"],
)
def test_values_are_spelled_as_the_text_format_wants(value: float, text: str) -> None:
    assert render.format_value(value) == text


@pytest.mark.parametrize(
    ("up", "present"), [(None, False), (True, True), (False, True)], ids=["pods-off", "pods-up", "pods-down"]
)
def test_exporter_stats_report_pod_resources_only_when_attribution_is_on(up: bool | None, present: bool) -> None:
    text = render.render_stats(render.ExporterStats(12.5, 0.003, 2, up))
    out = exposition.parse(text)
    assert out.named("kubegpu_exporter_collect_errors_total")[0].value == 2
    assert out.named("kubegpu_exporter_last_collect_timestamp_seconds")[0].value == 12.5
    assert bool(out.named("kubegpu_exporter_pod_resources_up")) is present
    if present:
        assert out.named("kubegpu_exporter_pod_resources_up")[0].value == (1.0 if up else 0.0)


_MIG = profiles.load("a100-mig")
_MIG_SAMPLE = SimulatedBackend(_MIG, fault_file=Path("/nonexistent/faults.jsonl"), clock=lambda: NOW).sample()
_MIG_UUIDS = [g.uuid for g in _MIG.gpus] + [m.uuid for m in _MIG.mig_devices()]


@settings(deadline=None, max_examples=30)
@given(
    holdings=st.lists(
        st.tuples(st.sampled_from(_MIG_UUIDS), st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])), max_size=12
    )
)
def test_no_two_series_share_a_name_and_label_set(holdings: list[tuple[str, str, str]]) -> None:
    holders: dict[str, set[PodRef]] = {}
    for uuid, pod, container in holdings:
        holders.setdefault(uuid, set()).add(PodRef("ns", pod, container))
    attribution_ = Attribution(holders={k: tuple(sorted(v)) for k, v in holders.items()})
    out = rendered(_MIG, _MIG_SAMPLE, attribution_)
    keys = [(s.name, tuple(sorted(s.labels.items()))) for s in out.samples]
    assert len(keys) == len(set(keys))


def test_a_1x_counters_file_serves_the_1x_names_from_their_dcgm_fields(tmp_path: Path) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    one_x = counters.parse("dcgm_gpu_temp, gauge, GPU temperature.\ndcgm_fi_prof_dram_active, gauge, DRAM.\n")
    out = rendered(machine, sample, counter_set=one_x)
    assert {n for n in out.names() if n.startswith("dcgm")} == {"dcgm_gpu_temp", "dcgm_fi_prof_dram_active"}
    assert [s.value for s in out.named("dcgm_gpu_temp")] == [g.gpu_temp_c for g in sample.gpus]


def test_old_namespace_uses_the_1x_label_names(tmp_path: Path) -> None:
    machine, sample = sample_of("dgx-a100", tmp_path)
    holders = Attribution(holders={machine.gpus[1].uuid: (PodRef("ns", "train", "main"),)})
    out = rendered(machine, sample, holders, options=replace(OPTIONS, old_namespace=True))
    held = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "1")
    assert held.labels["uuid"] == machine.gpus[1].uuid and "UUID" not in held.labels
    assert (held.labels["pod_name"], held.labels["pod_namespace"], held.labels["container_name"]) == (
        "train", "ns", "main"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        ("f", {("0", None), ("1", None), *(("2", str(i)) for i in range(1, 8))}),
        ("g", {("0", None), ("1", None), ("2", None)}),
        ("g:1", {("1", None)}),
        ("i", {*(("2", str(i)) for i in range(1, 8))}),
        ("i:1,3-4", {("2", "1"), ("2", "3"), ("2", "4")}),
        ("g:0+i:2", {("0", None), ("2", "2")}),
    ],
)
def test_the_devices_flag_picks_gpus_and_gpu_instances(tmp_path: Path, devices: str, expected: set[object]) -> None:
    machine, sample = sample_of("a100-mig", tmp_path)
    assert [len(g.mig_devices) for g in machine.gpus[:3]] == [0, 0, 7]  # GPU 2: GPU_I_IDs 1-7
    out = rendered(machine, sample, options=replace(OPTIONS, devices=options.parse_devices(devices)))
    got = {(s.labels["gpu"], s.labels.get("GPU_I_ID")) for s in out.named("DCGM_FI_DEV_GPU_TEMP")}
    assert {g for g in got if g[0] in ("0", "1", "2")} == expected  # GPUs 0-2 cover every case


def test_pod_labels_join_the_label_fields_by_name_and_the_pod_uid_follows_pod(tmp_path: Path) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    ref = PodRef("ml", "train", "main", uid="u-1", labels=(("app", "trainer"), ("zone", "b")))
    out = rendered(machine, sample, Attribution(holders={machine.gpus[0].uuid: (ref,)}))
    held = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "0")
    names = list(held.labels)
    # dcgm-exporter writes its label map (label fields and pod labels) by name, then the pod attributes.
    assert names[names.index("Hostname") + 1 :] == [
        "DCGM_FI_DRIVER_VERSION", "app", "zone", "container", "namespace", "pod", "pod_uid"
    ]  # fmt: skip
    assert (held.labels["app"], held.labels["zone"], held.labels["pod_uid"]) == ("trainer", "b", "u-1")
    other = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "1")
    assert "app" not in other.labels and "pod_uid" not in other.labels


def test_a_pod_label_named_like_an_exporter_label_is_left_out(tmp_path: Path) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    clashing = (("DCGM_FI_DRIVER_VERSION", "x"), ("gpu", "x"), ("pod", "x"), ("modelName", "x"), ("ok", "y"))
    ref = PodRef("ml", "train", "main", labels=clashing)
    out = rendered(machine, sample, Attribution(holders={machine.gpus[0].uuid: (ref,)}))
    held = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels.get("pod") == "train")
    assert held.labels["gpu"] == "0" and held.labels["ok"] == "y" and held.labels["modelName"] != "x"
    assert held.labels["DCGM_FI_DRIVER_VERSION"] != "x"


def test_label_fields_and_1x_pod_labels_are_written_by_name_as_dcgm_exporters_template_does(tmp_path: Path) -> None:
    machine, sample = sample_of("pcie-4xt4", tmp_path)
    text = "DCGM_FI_DEV_GPU_TEMP, gauge, T.\nDCGM_FI_DRIVER_VERSION, label, D.\nDCGM_FI_DEV_SERIAL, label, S.\n"
    holders = Attribution(holders={machine.gpus[0].uuid: (PodRef("ns", "train", "main"),)})
    options = replace(OPTIONS, old_namespace=True)
    out = rendered(machine, sample, holders, options=options, counter_set=counters.parse(text))
    held = next(s for s in out.named("DCGM_FI_DEV_GPU_TEMP") if s.labels["gpu"] == "0")
    names = list(held.labels)
    assert names[names.index("Hostname") + 1 :] == [
        "DCGM_FI_DEV_SERIAL", "DCGM_FI_DRIVER_VERSION", "container_name", "pod_name", "pod_namespace"
    ]  # fmt: skip
