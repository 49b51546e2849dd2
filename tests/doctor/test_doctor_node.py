"""``kubegpu doctor`` against the kubelet emulator and the real plugin as processes: all pass, then each fault is named.

The node's device nodes are real character devices under a temporary dev root (made with mknod, so root is
needed) and the container runtime's config is a real containerd file; everything else is the running processes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import faults, profiles

MACHINE = "dgx-a100"
ENV = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # node checks only
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="device nodes under the dev root need mknod (root)")


@pytest.fixture
def node() -> Iterator[LocalNode]:
    with LocalNode(machine=MACHINE) as n:
        n.start_kubelet()
        n.start_plugin()
        n.wait_for(lambda s: s["resources"].get("nvidia.com/gpu", {}).get("allocatable") == 8, timeout=60)
        yield n


@pytest.fixture
def host(tmp_path: Path) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    gpus = profiles.load(MACHINE).gpus
    for i, name in enumerate(["nvidiactl", "nvidia-uvm", *(f"nvidia{g.minor}" for g in gpus)]):
        os.mknod(dev / name, stat.S_IFCHR | 0o666, os.makedev(195, 200 + i))
    (tmp_path / "config.toml").write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
    )
    return tmp_path


def doctor(node: LocalNode, host: Path, *extra: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = subprocess.run(
        [
            sys.executable, "-m", "kubegpu", "doctor", "--json",
            "--socket-dir", str(node.socket_dir),
            "--machine", MACHINE, "--fault-file", str(node.fault_file),
            "--dev-root", str(host),
            "--runtime-config", str(host / "config.toml"),
            *extra,
        ],
        capture_output=True, text=True, timeout=60, check=False, env=ENV,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks


def test_every_check_passes_on_a_working_node(node: LocalNode, host: Path) -> None:
    code, checks = doctor(node, host, "--cuda-version", "12.2")
    assert code == 0, [c for c in checks.values() if not c["ok"]]
    assert list(checks) == [
        "device-plugin directory",
        "kubelet.sock",
        "plugin sockets",
        "plugin registration",
        "NVML and driver",
        "CUDA compatibility",
        "device nodes",
        "GPU health",
        "container runtime",
    ]
    assert "nvidia.com/gpu 8 healthy" in checks["plugin registration"]["detail"]
    assert all(c["fix"] == "" for c in checks.values())


def test_with_the_plugin_stopped_it_names_the_failing_checks_and_the_fix(node: LocalNode, host: Path) -> None:
    node.stop("plugin")
    code, checks = doctor(node, host)
    assert code == 1
    failing = {name for name, c in checks.items() if not c["ok"]}
    assert "plugin sockets" in failing
    assert "no nvidia-*.sock" in checks["plugin sockets"]["detail"]
    assert checks["plugin sockets"]["fix"].startswith("start the device plugin")
    assert checks["kubelet.sock"]["ok"] and checks["NVML and driver"]["ok"]


def test_an_xid_makes_the_gpu_unhealthy_with_its_last_xid(node: LocalNode, host: Path) -> None:
    node.inject(faults.Fault("xid", gpu=3, xid=79))
    node.wait_for(lambda s: s["resources"]["nvidia.com/gpu"]["allocatable"] == 7, timeout=30)
    code, checks = doctor(node, host)
    assert code == 1
    assert not checks["GPU health"]["ok"]
    assert "GPU 3 " in checks["GPU health"]["detail"] and "last XID 79" in checks["GPU health"]["detail"]


def test_an_image_newer_than_the_driver_fails_the_cuda_check(node: LocalNode, host: Path) -> None:
    code, checks = doctor(node, host, "--image", "nvidia/cuda:12.6.2-base-ubuntu22.04")
    assert code == 1
    assert "needs CUDA 12.6" in checks["CUDA compatibility"]["detail"]
    assert "upgrade the node's driver" in checks["CUDA compatibility"]["fix"]


def test_missing_device_nodes_and_runtime_config_are_named(node: LocalNode, host: Path) -> None:
    (host / "dev" / "nvidia-uvm").unlink()
    (host / "config.toml").write_text("version = 2\n")
    _, checks = doctor(node, host)
    assert "nvidia-uvm" in checks["device nodes"]["detail"]
    assert (
        not checks["container runtime"]["ok"] and "nvidia-ctk runtime configure" in checks["container runtime"]["fix"]
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cuda-version", "twelve"], "kubegpu doctor: error: --cuda-version: not a CUDA version"),
        (["--machine", "nope"], "kubegpu doctor: error: --machine: "),
        (["--kubeconfig", "/nonexistent/kc"], "kubegpu doctor: error: --kubeconfig /nonexistent/kc: no such file"),
    ],
    ids=["cuda", "machine", "kubeconfig"],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "doctor", *argv], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(message)


def test_with_a_cdi_strategy_the_plugins_spec_is_checked(host: Path) -> None:
    cdi = host / "cdi"
    with LocalNode(machine=MACHINE, plugin_args=["--device-list-strategy", "cdi-cri", "--cdi-spec-dir", str(cdi)]) as n:
        n.start_kubelet()
        n.start_plugin()
        n.wait_for(lambda s: s["resources"].get("nvidia.com/gpu", {}).get("allocatable") == 8, timeout=60)
        strategy = ("--device-list-strategy", "cdi-cri", "--cdi-spec-dir", str(cdi))
        code, checks = doctor(n, host, *strategy)
        assert code == 0, [c for c in checks.values() if not c["ok"]]
        assert "ok (k8s.device-plugin.nvidia.com/gpu" in checks["CDI spec"]["detail"]
        spec = cdi / "k8s.device-plugin.nvidia.com-gpu.json"
        spec.write_text(spec.read_text().replace('"containerEdits"', '"containerEdit"', 1))
        code, checks = doctor(n, host, *strategy)
        assert code == 1 and not checks["CDI spec"]["ok"]
        assert "containerEdit" in checks["CDI spec"]["detail"]
        assert "kubegpu cdi validate" in checks["CDI spec"]["fix"]
