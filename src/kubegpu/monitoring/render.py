"""Rendering: one telemetry sample as Prometheus text exposition (format 0.0.4), dcgm-exporter style.

Owns the series layout: which entities get series (a whole GPU, or each MIG
device of a MIG-enabled GPU), their labels in dcgm-exporter's order
(``gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID],
[Hostname], <label fields>, [container, namespace, pod]``), one series per
holding container, value formatting and escaping, and the exporter's own
``kubegpu_exporter_*`` series. Pure: no I/O, no clock (times are passed in).

The text is written here rather than with prometheus_client's metric
families because client_python appends ``_total`` to every counter sample,
and dcgm-exporter's counters (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` …)
must keep their exact names for existing dashboards to work.

A GPU whose sample is unavailable (lost, fallen off the bus) gets no DCGM
series at all, as dcgm-exporter skips blank values; instead
``kubegpu_exporter_gpu_available`` is 0 for it (1 for every readable GPU).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubegpu.gpu.model import Gpu, Machine, MigDevice
from kubegpu.gpu.telemetry import GpuSample, MachineSample, MigSample
from kubegpu.monitoring import fields
from kubegpu.monitoring.attribution import Attribution, PodRef
from kubegpu.monitoring.counters import CounterSet
from kubegpu.monitoring.options import FLEX, DeviceSpec

#: The hostname label's spellings: released dcgm-exporter 4.x and dcgm-exporter main (PR #655).
HOSTNAME_LABELS = ("Hostname", "hostname")

GPU_AVAILABLE = "kubegpu_exporter_gpu_available"


@dataclass(frozen=True)
class LabelOptions:
    """How the GPU labels are spelled.

    Parameters:
        hostname_label: ``Hostname`` (default, released dcgm-exporter 4.x), ``hostname``, or None for no label.
        hostname: the node name put in that label.
        replace_blanks_in_model_name: ``NVIDIA A100-SXM4-80GB`` -> dashes instead of spaces in ``modelName``.
        old_namespace: dcgm-exporter 1.x label names (``-o``): ``uuid``, ``pod_name``, ``pod_namespace``,
            ``container_name``.
        devices: which GPUs and GPU instances get series (``-d``; flex by default).
    """

    hostname_label: str | None = "Hostname"
    hostname: str = ""
    replace_blanks_in_model_name: bool = False
    old_namespace: bool = False
    devices: DeviceSpec = FLEX


@dataclass(frozen=True)
class Entity:
    """Something that gets its own series: a whole GPU, or one MIG device of a MIG-enabled GPU."""

    gpu: Gpu
    mig: MigDevice | None
    labels: str  # the label pairs before the pod labels, comma-separated, no braces
    old_namespace: bool = False
    fixed: str = ""  # ``labels`` without the label fields: up to the hostname
    label_fields: tuple[tuple[str, str], ...] = ()  # (DCGM_FI_DRIVER_VERSION, value) …


def escape_label_value(value: str) -> str:
    """A label value escaped for the text format (backslash, double quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP text escaped for the text format (backslash, newline)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as the text format spells it; integral values without a decimal point."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{name}="{escape_label_value(value)}"' for name, value in pairs)


def entities(machine: Machine, counter_set: CounterSet, options: LabelOptions) -> tuple[Entity, ...]:
    """The series owners of ``machine`` with their fixed labels, in GPU then MIG order.

    Flex devices (the default): the MIG devices of a MIG-enabled GPU, else the GPU. Otherwise the GPUs
    of ``devices.major`` as whole GPUs and the GPU instances (by ``GPU_I_ID``) of ``devices.minor``.
    """
    out: list[Entity] = []
    spec = options.devices
    old = options.old_namespace
    label_fields = [fields.LABEL_FIELDS[c.field] for c in counter_set.labels]
    for gpu in machine.gpus:
        model = gpu.product_name.replace(" ", "-") if options.replace_blanks_in_model_name else gpu.product_name
        head = [
            ("gpu", str(gpu.index)),
            ("uuid" if old else "UUID", gpu.uuid),
            ("pci_bus_id", gpu.pci_bus_id),
            ("device", f"nvidia{gpu.minor}"),
            ("modelName", model),
        ]
        host: list[tuple[str, str]] = []
        if options.hostname_label:
            host.append((options.hostname_label, options.hostname))
        # dcgm-exporter writes its label map by name (Go's template ranges over a map in key order).
        values = tuple(sorted((f.name, f.value(machine, gpu)) for f in label_fields))
        tail = [*host, *values]
        migs = gpu.mig_devices if gpu.mig_enabled else ()
        whole = not migs if spec.flex else spec.major is not None and (not spec.major or gpu.index in spec.major)
        if whole:
            out.append(
                Entity(
                    gpu=gpu,
                    mig=None,
                    labels=_pairs([*head, *tail]),
                    old_namespace=old,
                    fixed=_pairs([*head, *host]),
                    label_fields=values,
                )
            )
        for mig in migs:
            if not spec.flex and (spec.minor is None or (spec.minor and mig.gi_id not in spec.minor)):
                continue
            mig_labels = [("GPU_I_PROFILE", mig.profile), ("GPU_I_ID", str(mig.gi_id))]
            out.append(
                Entity(
                    gpu=gpu,
                    mig=mig,
                    labels=_pairs([*head, *mig_labels, *tail]),
                    old_namespace=old,
                    fixed=_pairs([*head, *mig_labels, *host]),
                    label_fields=values,
                )
            )
    return tuple(out)


#: The pod attributes' names (dcgm-exporter's, and its 1.x names with ``-o``) and the pod UID label's.
POD_LABELS = ("container", "namespace", "pod")
OLD_POD_LABELS = ("container_name", "pod_namespace", "pod_name")
POD_UID_LABEL = "pod_uid"
#: dcgm-exporter writes the pod attributes by name too: container_name, pod_name, pod_namespace with ``-o``.
#: Names a pod label may not take: the exporter's own (a duplicate label name makes the page invalid).
RESERVED_LABELS = frozenset(
    {"gpu", "UUID", "uuid", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", *HOSTNAME_LABELS}
    | {*POD_LABELS, *OLD_POD_LABELS, POD_UID_LABEL}
)


def _pod_part(ref: PodRef, old_namespace: bool = False) -> str:
    names = OLD_POD_LABELS if old_namespace else POD_LABELS
    pairs = list(zip(names, (ref.container, ref.namespace, ref.pod), strict=True))
    if ref.uid:
        pairs.append((POD_UID_LABEL, ref.uid))
    return _pairs(sorted(pairs))


def _with_pod_labels(entity: Entity, ref: PodRef) -> str:
    """The entity's labels with ``ref``'s pod labels merged into its label fields, by name as dcgm-exporter
    writes its label map; a pod label named like one of the exporter's own labels is left out."""
    taken = {name for name, _ in entity.label_fields}
    merged = [*entity.label_fields, *((k, v) for k, v in ref.labels if k not in RESERVED_LABELS and k not in taken)]
    labels = _pairs(sorted(merged))
    return f"{entity.fixed},{labels}" if labels else entity.fixed


def _label_sets(entity: Entity, attribution: Attribution) -> list[str]:
    """``{…}`` label sets of one entity: one per holding container, or one without pod labels."""
    holders: Sequence[PodRef] = attribution.of(entity.gpu.uuid)
    if entity.mig is not None:
        # A whole-GPU allocation of a MIG-enabled GPU covers all of its MIG devices.
        holders = sorted(set(attribution.of(entity.mig.uuid)) | set(holders))
    if not holders:
        return ["{" + entity.labels + "}"]
    return [
        "{"
        + (_with_pod_labels(entity, ref) if ref.labels else entity.labels)
        + ","
        + _pod_part(ref, entity.old_namespace)
        + "}"
        for ref in holders
    ]


@dataclass(frozen=True)
class _Row:
    label_sets: list[str]
    gpu: GpuSample
    mig: MigSample | None
    mig_device: bool


def render_sample(
    ents: Sequence[Entity],
    counter_set: CounterSet,
    sample: MachineSample,
    attribution: Attribution,
) -> str:
    """The DCGM series of one sample, then ``kubegpu_exporter_gpu_available``."""
    by_index = {g.index: g for g in sample.gpus}
    mig_by_uuid = {m.uuid: m for g in sample.gpus for m in g.mig}
    rows: list[_Row] = []
    availability: list[str] = []
    for entity in ents:
        gpu_sample = by_index.get(entity.gpu.index)
        label_sets = _label_sets(entity, attribution)
        available = gpu_sample is not None and gpu_sample.available
        availability.extend(f"{GPU_AVAILABLE}{labels} {1 if available else 0}\n" for labels in label_sets)
        if gpu_sample is None or not available:
            continue
        mig_sample = mig_by_uuid.get(entity.mig.uuid) if entity.mig is not None else None
        rows.append(_Row(label_sets, gpu_sample, mig_sample, entity.mig is not None))

    out: list[str] = []
    for counter in counter_set.values:
        field = fields.FIELDS[counter.field]
        lines: list[str] = []
        for row in rows:
            value: float | None
            if not row.mig_device or field.scope is fields.Scope.DEVICE:
                value = getattr(row.gpu, field.gpu_attr)
            elif field.scope is fields.Scope.INSTANCE and row.mig is not None and field.mig_attr is not None:
                value = getattr(row.mig, field.mig_attr)
            else:
                value = None
            if value is None:
                continue
            text = format_value(value)
            lines.extend(f"{counter.name}{labels} {text}\n" for labels in row.label_sets)
        if lines:
            out.append(f"# HELP {counter.name} {escape_help(counter.help)}\n# TYPE {counter.name} {counter.type}\n")
            out.extend(lines)
    if availability:
        out.append(
            f"# HELP {GPU_AVAILABLE} 1 when the GPU answered the last collection, 0 when it is lost "
            "(its DCGM series are then absent).\n"
            f"# TYPE {GPU_AVAILABLE} gauge\n"
        )
        out.extend(availability)
    return "".join(out)


@dataclass(frozen=True)
class ExporterStats:
    """The exporter's own health, rendered after the GPU series."""

    last_collect_timestamp: float
    collect_duration_s: float
    collect_errors_total: int
    pod_resources_up: bool | None  # None when pod attribution is off


def render_stats(stats: ExporterStats) -> str:
    """``kubegpu_exporter_*`` series about collection itself."""
    out = [
        "# HELP kubegpu_exporter_last_collect_timestamp_seconds Unix time of the last successful collection.\n",
        "# TYPE kubegpu_exporter_last_collect_timestamp_seconds gauge\n",
        f"kubegpu_exporter_last_collect_timestamp_seconds {format_value(stats.last_collect_timestamp)}\n",
        "# HELP kubegpu_exporter_collect_duration_seconds Time the last collection took (telemetry and pod "
        "resources).\n",
        "# TYPE kubegpu_exporter_collect_duration_seconds gauge\n",
        f"kubegpu_exporter_collect_duration_seconds {format_value(stats.collect_duration_s)}\n",
        "# HELP kubegpu_exporter_collect_errors_total Collections that failed to read telemetry.\n",
        "# TYPE kubegpu_exporter_collect_errors_total counter\n",
        f"kubegpu_exporter_collect_errors_total {stats.collect_errors_total}\n",
    ]
    if stats.pod_resources_up is not None:
        out += [
            "# HELP kubegpu_exporter_pod_resources_up 1 when the last kubelet pod-resources List succeeded.\n",
            "# TYPE kubegpu_exporter_pod_resources_up gauge\n",
            f"kubegpu_exporter_pod_resources_up {1 if stats.pod_resources_up else 0}\n",
        ]
    return "".join(out)
