"""Reading the trace CSVs: the real formats load, and every malformed file is named by file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.scheduling.core.errors import TraceError
from kubegpu.scheduling.simulate.trace import read_nodes, read_pods
from tests.shared import shared_path

TRACE = ("traces", "alibaba-gpu-v2023")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shared_trace_loads_with_its_published_totals() -> None:
    nodes = read_nodes(shared_path(*TRACE) / "openb_node_list_gpu_node.csv")
    pods = read_pods(shared_path(*TRACE) / "openb_pod_list_default.csv")
    assert (len(nodes), sum(n.gpus for n in nodes)) == (1213, 6212)
    assert len(pods) == 8152 and sum(1 for p in pods if p.num_gpu == 0) == 1088
    spec = read_pods(shared_path(*TRACE) / "openb_pod_list_gpuspec05.csv")
    assert any(p.gpu_models for p in spec)


def test_a_five_column_pod_list_is_enough(tmp_path: Path) -> None:
    path = write(
        tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,0,8,1000\np2,4000,512,1,470\n"
    )
    pods = read_pods(path)
    assert [(p.num_gpu, p.gpu_milli, p.gpu_models) for p in pods] == [(8, 1000, frozenset()), (1, 470, frozenset())]


def test_gpu_spec_lists_allowed_models(tmp_path: Path) -> None:
    path = write(
        tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,0,1,1000,V100M16|V100M32\n"
    )
    assert read_pods(path)[0].gpu_models == frozenset({"V100M16", "V100M32"})


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("name,cpu_milli,num_gpu,gpu_milli\np,1,0,0\n", 1, "memory_mib", "missing from the header"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0,0,0\nq,1,0,1,abc\n",
            3,
            "gpu_milli",
            "'abc' is not a number",
        ),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1.5,0,0,0\n", 2, "cpu_milli", "'1.5' is not a whole number"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,-4,0,0\n", 2, "memory_mib", "must not be negative"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0,1,1500\n", 2, "gpu_milli", "more than one GPU"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0,2,500\n", 2, "num_gpu", "must ask for one GPU"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0,0,500\n", 2, "gpu_milli", "does not go with num_gpu=0"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0,0,0\np,1,0,0,0\n", 3, "name", "appears twice"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,0\n", 2, "memory_mib", "row has 3 fields"),
        ("", 1, "", "empty file"),
    ],
    ids=[
        "missing-column",
        "bad-number",
        "fraction",
        "negative",
        "above-one-gpu",
        "shared-multi-gpu",
        "share-without-gpus",
        "duplicate",
        "short-row",
        "empty",
    ],
)
def test_malformed_pod_list_names_file_line_and_column(
    tmp_path: Path, text: str, line: int, column: str, message: str
) -> None:
    path = write(tmp_path, "pods.csv", text)
    with pytest.raises(TraceError) as err:
        read_pods(path)
    assert (err.value.path, err.value.line, err.value.column) == (str(path), line, column)
    assert message in err.value.message and str(err.value).startswith(f"{path}:{line}: column {column!r}: ")


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n", 1, "model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,x,T4\n", 2, "gpu"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", 2, "model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,T4\nn,1,1,2,T4\n", 3, "sn"),
    ],
    ids=["missing-model-column", "bad-gpu-count", "gpus-without-model", "duplicate-node"],
)
def test_malformed_node_list_names_file_line_and_column(tmp_path: Path, text: str, line: int, column: str) -> None:
    path = write(tmp_path, "nodes.csv", text)
    with pytest.raises(TraceError) as err:
        read_nodes(path)
    assert (err.value.line, err.value.column) == (line, column)


def test_a_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot open"):
        read_pods(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    ("rows", "line", "message"),
    [
        ("p,1,0,0,0,,2\n", 2, "needs a pod_group"),
        ("p,1,0,0,0,g,2\nq,1,0,0,0,g,3\n", 3, "3 but group 'g' has 2 pods"),
    ],
    ids=["min-member-without-group", "min-member-above-group-size"],
)
def test_gang_columns_are_checked(tmp_path: Path, rows: str, line: int, message: str) -> None:
    path = write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,pod_group,min_member\n" + rows)
    with pytest.raises(TraceError, match=message) as err:
        read_pods(path)
    assert (err.value.line, err.value.column) == (line, "min_member")


def test_priority_and_gang_columns_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,priority,pod_group,min_member\n"
        "p,1,0,1,1000,-5,job,2\nq,1,0,1,1000,7,job,\n",
    )
    p, q = read_pods(path)
    assert (p.priority, p.group, p.min_member, q.priority, q.min_member) == (-5, "job", 2, 7, 0)
