"""Excerpts for people: the pod-labelled lines of one metric, shortened."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.gpu import profiles
from kubegpu.gpu.simulated import SimulatedBackend
from kubegpu.monitoring import counters, excerpt, render
from kubegpu.monitoring.attribution import Attribution, PodRef
from tests.monitoring import exposition

MACHINE = profiles.load("dgx-a100")
SAMPLE = SimulatedBackend(MACHINE, fault_file=Path("/nonexistent/f.jsonl"), clock=lambda: 1e9).sample()
DEFAULT = counters.parse(counters.default_text())
ENTITIES = render.entities(MACHINE, DEFAULT, render.LabelOptions(hostname="node-1"))


def page(holders: dict[int, tuple[PodRef, ...]]) -> str:
    attribution = Attribution(holders={MACHINE.gpus[i].uuid: refs for i, refs in holders.items()})
    return render.render_sample(ENTITIES, DEFAULT, SAMPLE, attribution)


def test_only_pod_labelled_lines_of_the_metric_are_kept_without_the_noisy_labels() -> None:
    text = page({2: (PodRef("ml", "train", "main"),), 5: (PodRef("ml", "infer", "srv"),)})
    lines = excerpt.pod_lines(text)
    util = {str(g.index): g.gpu_util_pct or 0.0 for g in SAMPLE.gpus}
    assert lines == [
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="2",container="main",namespace="ml",pod="train"}} {render.format_value(util["2"])}',
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="5",container="srv",namespace="ml",pod="infer"}} {render.format_value(util["5"])}',
    ]


def test_nothing_is_picked_when_no_pod_holds_a_gpu() -> None:
    assert excerpt.pod_lines(page({})) == []


def test_another_metric_and_no_dropping_keep_the_full_line() -> None:
    text = page({0: (PodRef("a", "b", "c"),)})
    (line,) = excerpt.pod_lines(text, metric="DCGM_FI_DEV_FB_USED", drop=())
    assert line in text.split("\n")


@settings(deadline=None, max_examples=50)
@given(pod=st.text(st.characters(codec="utf-8"), min_size=1, max_size=15))
def test_escaped_pod_names_stay_escaped_and_parseable(pod: str) -> None:
    (line,) = excerpt.pod_lines(page({1: (PodRef("ns", pod, "c"),)}))
    (sample,) = exposition.parse(line).samples
    assert sample.labels["pod"] == pod
