"""Reading the Alibaba GPU trace's CSV files into node and pod specifications.

Owns the CSV formats of ``openb_node_list_*.csv`` (``sn, cpu_milli,
memory_mib, gpu, model``) and ``openb_pod_list_*.csv`` (``name, cpu_milli,
memory_mib, num_gpu, gpu_milli`` required; ``gpu_spec``, ``priority``,
``pod_group`` and ``min_member`` optional; timestamps and other columns
ignored, as the FGD protocol ignores them). Every problem raises :class:`TraceError` naming the file, the line and
the column. Must not schedule anything.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from kubegpu.scheduling.core.errors import TraceError
from kubegpu.scheduling.core.model import NodeSpec, PodSpec

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for each data row, after checking the header names every required column."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(str(path), 0, "", f"cannot open: {exc.strerror or exc}") from exc
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                raise TraceError(str(path), 1, "", "empty file, expected a header line")
            header = [h.strip() for h in header]
            for column in required:
                if column not in header:
                    raise TraceError(str(path), 1, column, f"missing from the header (found: {', '.join(header)})")
            for record in reader:
                if not record or all(not cell.strip() for cell in record):
                    continue
                if len(record) != len(header):
                    raise TraceError(
                        str(path),
                        reader.line_num,
                        header[min(len(record), len(header)) - 1],
                        f"row has {len(record)} fields, the header has {len(header)}",
                    )
                yield reader.line_num, dict(zip(header, (c.strip() for c in record), strict=True))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceError(str(path), reader.line_num, "", f"not a readable CSV file: {exc}") from exc


def _int(
    path: Path, line: int, row: dict[str, str], column: str, default: int | None = None, signed: bool = False
) -> int:
    text = row.get(column, "")
    if text == "" and default is not None:
        return default
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise TraceError(str(path), line, column, f"{text!r} is not a number") from None
        if not as_float.is_integer():
            raise TraceError(str(path), line, column, f"{text!r} is not a whole number") from None
        value = int(as_float)
    if value < 0 and not signed:
        raise TraceError(str(path), line, column, f"{text!r} must not be negative")
    return value


def read_nodes(path: Path | str) -> list[NodeSpec]:
    """Nodes of a node-list CSV, in file order; rejects repeated names."""
    path = Path(path)
    nodes: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for line, row in _rows(path, NODE_COLUMNS):
        name = row["sn"]
        if not name:
            raise TraceError(str(path), line, "sn", "empty node name")
        if name in seen:
            raise TraceError(str(path), line, "sn", f"node {name!r} already defined on line {seen[name]}")
        seen[name] = line
        gpus = _int(path, line, row, "gpu")
        model = row["model"]
        if gpus and not model:
            raise TraceError(str(path), line, "model", f"node {name!r} has {gpus} GPUs but no model")
        nodes.append(
            NodeSpec(
                name,
                _int(path, line, row, "cpu_milli"),
                _int(path, line, row, "memory_mib"),
                gpus,
                model if gpus else "",
            )
        )
    if not nodes:
        raise TraceError(str(path), 1, "", "no nodes in the file")
    return nodes


def read_pods(path: Path | str) -> list[PodSpec]:
    """Pods of a pod-list CSV, in file order."""
    path = Path(path)
    pods: list[PodSpec] = []
    seen: set[str] = set()
    members: dict[str, list[tuple[int, PodSpec]]] = {}
    for line, row in _rows(path, POD_COLUMNS):
        name = row["name"]
        if not name:
            raise TraceError(str(path), line, "name", "empty pod name")
        if name in seen:
            raise TraceError(str(path), line, "name", f"pod {name!r} appears twice")
        seen.add(name)
        num_gpu = _int(path, line, row, "num_gpu")
        gpu_milli = _int(path, line, row, "gpu_milli")
        if gpu_milli > 1000:
            raise TraceError(str(path), line, "gpu_milli", f"{gpu_milli} is more than one GPU (1000)")
        if (num_gpu == 0) != (gpu_milli == 0):
            raise TraceError(
                str(path), line, "gpu_milli", f"{gpu_milli} milli per GPU does not go with num_gpu={num_gpu}"
            )
        if 0 < gpu_milli < 1000 and num_gpu > 1:
            raise TraceError(
                str(path),
                line,
                "num_gpu",
                f"a fractional request ({gpu_milli} milli) must ask for one GPU, not {num_gpu}",
            )
        models = frozenset(m for m in row.get("gpu_spec", "").split("|") if m)
        group = row.get("pod_group", "")
        if not group and row.get("min_member", ""):
            raise TraceError(str(path), line, "min_member", "needs a pod_group")
        pods.append(
            PodSpec(
                name,
                _int(path, line, row, "cpu_milli"),
                _int(path, line, row, "memory_mib"),
                num_gpu,
                gpu_milli,
                models if num_gpu else frozenset(),
                priority=_int(path, line, row, "priority", default=0, signed=True),
                group=group,
                min_member=_int(path, line, row, "min_member", default=0),
            )
        )
        if group:
            members.setdefault(group, []).append((line, pods[-1]))
    if not pods:
        raise TraceError(str(path), 1, "", "no pods in the file")
    for group, lined in members.items():
        for line, member in lined:
            if member.min_member > len(lined):
                raise TraceError(
                    str(path), line, "min_member", f"{member.min_member} but group {group!r} has {len(lined)} pods"
                )
    return pods
