"""Test helper: the metric names a PromQL expression reads, and the metric names our components serve.

Good enough for the expressions in deploy/: strings, label matchers, groupings and ranges are removed,
then every remaining identifier that is not a function call or a keyword is a metric name.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from kubegpu.gpu import profiles
from kubegpu.gpu.simulated import SimulatedBackend
from kubegpu.monitoring import counters, render
from kubegpu.monitoring.attribution import EMPTY
from tests.conftest import REPO
from tests.monitoring import exposition

_KEYWORDS = {"by", "without", "and", "or", "unless", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS or re.fullmatch(r"(?i)inf|nan|e\d*", name):
            continue
        names.add(name)
    return names


@functools.cache
def exporter_metric_names() -> frozenset[str]:
    """Every series name the exporter serves with the shipped counters file (MIG machine, pods on)."""
    names: set[str] = set()
    default = counters.parse(counters.default_text())
    for machine_name in ("dgx-a100", "a100-mig"):
        machine = profiles.load(machine_name)
        sample = SimulatedBackend(machine, fault_file=Path("/nonexistent/f.jsonl")).sample()
        ents = render.entities(machine, default, render.LabelOptions())
        text = render.render_sample(ents, default, sample, EMPTY)
        text += render.render_stats(render.ExporterStats(1.0, 0.1, 0, True))
        names |= exposition.parse(text).names()
    return frozenset(names)


def plugin_metric_names(readme: Path = REPO / "README.md") -> set[str]:
    """The device plugin's metrics as the README's monitoring section lists them (histograms expanded)."""
    text = readme.read_text()
    section = text[text.index("<!-- section:monitoring -->") : text.index("<!-- /section:monitoring -->")]
    names: set[str] = set()
    for name, kind in re.findall(r"^\| `(kubegpu_plugin_\w+)` \| (\w+) \|", section, re.MULTILINE):
        names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names
