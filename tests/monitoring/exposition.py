"""Test helper: a strict reader of the exporter's text exposition, keeping names exactly as written.

prometheus_client's parser renames counter samples to ``<name>_total``, which would hide exactly the
dcgm-exporter naming these tests check, so this reads the lines itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    label_order: tuple[str, ...]
    value: float


@dataclass(frozen=True)
class Exposition:
    samples: list[Sample]
    types: dict[str, str]
    helps: dict[str, str]

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse(text: str) -> Exposition:
    samples: list[Sample] = []
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP ") :].partition(" ")
            helps[name] = help_text
            continue
        if line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE ") :].partition(" ")
            types[name] = kind
            continue
        match = _SAMPLE.match(line)
        assert match, f"line {number} is not a sample: {line!r}"
        name, raw_labels, value = match.groups()
        labels: dict[str, str] = {}
        order: list[str] = []
        rest = raw_labels or ""
        while rest:
            label = _LABEL.match(rest)
            assert label, f"line {number}: bad labels {rest!r}"
            labels[label.group(1)] = _unescape(label.group(2))
            order.append(label.group(1))
            rest = rest[label.end() :]
        samples.append(Sample(name, labels, tuple(order), float(value)))
    return Exposition(samples, types, helps)
