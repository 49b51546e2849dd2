"""Finding and starting libnvidia-ml.so.1: search order, and errors that say what was looked for and where.

Each case runs in its own process: a process loads one NVML library for good,
and the default loader path (LD_LIBRARY_PATH) is read when a process starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.gpu.nvml import decode
from tests.fake_nvml import harness

pytest_plugins = ["tests.fake_nvml.fixtures"]

#: Prints what NvmlBackend says about this process's NVML as one JSON line.
PROBE = """
import json, sys
from kubegpu.gpu import errors
from kubegpu.gpu.nvml import NvmlBackend
backend = NvmlBackend(driver_root=sys.argv[1], container_driver_root=sys.argv[2], sysfs_root=sys.argv[3])
try:
    machine = backend.discover()
    print(json.dumps({"library": backend.library_path, "gpus": len(machine.gpus)}))
except errors.NvmlUnavailable as exc:
    print(json.dumps({"error": str(exc), "code": exc.code, "searched": list(exc.searched)}))
finally:
    backend.close()
"""


def probe(
    node: harness.FakeNode, driver_root: Path, container_root: Path, ld_library_path: Path | None = None
) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(node.env)
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = str(ld_library_path)
    args = [sys.executable, "-c", PROBE, str(driver_root), str(container_root), str(node.sysfs_root)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def node(tmp_path: Path, fake_library: Path) -> harness.FakeNode:
    return harness.stage(tmp_path / "node", "pcie-4xt4", fake_library)


def test_the_library_under_the_driver_root_is_used(node: harness.FakeNode, tmp_path: Path) -> None:
    result = probe(node, node.driver_root, tmp_path / "no-container-root")
    assert result == {"library": str(node.library_dir / decode.LIBRARY_NAME), "gpus": 4}


def test_the_container_driver_root_is_searched_before_the_driver_root(
    node: harness.FakeNode, tmp_path: Path, fake_library: Path
) -> None:
    container = harness.stage(tmp_path / "container", "pcie-4xt4", fake_library)
    result = probe(node, node.driver_root, container.driver_root)
    assert result["library"] == str(container.library_dir / decode.LIBRARY_NAME)


def test_the_default_loader_path_is_the_last_resort(node: harness.FakeNode, tmp_path: Path) -> None:
    result = probe(node, tmp_path / "empty", tmp_path / "empty-too", ld_library_path=node.library_dir)
    assert result["gpus"] == 4
    assert Path(str(result["library"])).resolve() == (node.library_dir / decode.LIBRARY_NAME).resolve()


def test_a_missing_library_is_an_error_listing_every_path_tried(node: harness.FakeNode, tmp_path: Path) -> None:
    driver, container = tmp_path / "host-driver", tmp_path / "ctr-driver"
    result = probe(node, driver, container)
    expected = [f"{root}{d}/libnvidia-ml.so.1" for root in (container, driver) for d in decode.LIBRARY_DIRS]
    assert result["code"] == decode.ERROR_LIBRARY_NOT_FOUND
    loader = "libnvidia-ml.so.1 on the default loader path (LD_LIBRARY_PATH, ld.so.cache)"
    assert result["searched"] == [*expected, loader]
    message = str(result["error"])
    assert message.startswith("libnvidia-ml.so.1 not found; looked in: ")
    assert all(path in message for path in expected)


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        (harness.DRIVER_NOT_LOADED, "the NVIDIA kernel driver is not loaded"),
        (harness.LIB_RM_VERSION_MISMATCH, "driver/library version mismatch"),
        (harness.NO_PERMISSION, "no permission to use the GPUs"),
        (harness.UNKNOWN, "NVML initialisation failed: Unknown Error"),
    ],
    ids=["driver-not-loaded", "driver-library-mismatch", "no-permission", "unknown"],
)
def test_init_failures_name_the_cause_the_code_and_the_library(
    node: harness.FakeNode, tmp_path: Path, code: int, cause: str
) -> None:
    node.init_error(code)
    result = probe(node, node.driver_root, tmp_path / "no-container-root")
    assert result["code"] == code
    message = str(result["error"])
    assert message.startswith(cause)
    assert f"NVML error {code}" in message and str(node.library_dir / decode.LIBRARY_NAME) in message


def test_a_machine_without_gpus_is_an_error_naming_the_library(tmp_path: Path, fake_library: Path) -> None:
    node = harness.stage(tmp_path / "node", "pcie-4xt4", fake_library)
    data = json.loads(node.profile_json.read_text())
    data["gpus"] = []
    node.profile_json.write_text(json.dumps(data))
    result = probe(node, node.driver_root, tmp_path / "no-container-root")
    assert result["error"] == f"NVML found no GPUs (library {node.library_dir / decode.LIBRARY_NAME})"
    assert result["searched"] == [f"{tmp_path}/no-container-root{d}/libnvidia-ml.so.1" for d in decode.LIBRARY_DIRS] + [
        f"{node.driver_root}/usr/lib64/libnvidia-ml.so.1",
        f"{node.driver_root}/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    ]


def test_the_inspection_command_prints_the_inventory_or_one_error_line(node: harness.FakeNode, tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}, **node.env}
    command = [sys.executable, "-m", "kubegpu.gpu.nvml", "--sysfs-root", str(node.sysfs_root)]
    ok = subprocess.run(
        [*command, "--driver-root", str(node.driver_root)], env=env, capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
    assert "GPU 3 " in ok.stdout and "Tesla T4" in ok.stdout and "topo GPU0:" in ok.stdout
    missing = subprocess.run(
        [*command, "--driver-root", str(tmp_path / "x"), "--container-driver-root", str(tmp_path / "y")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("nvml: libnvidia-ml.so.1 not found; looked in: ")
    assert missing.stderr.count("\n") == 1


def test_the_fake_library_takes_a_shipped_profile_name_and_exports_it_itself(
    node: harness.FakeNode, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(node.env)
    env.update({"KUBEGPU_FAKE_NVML_PROFILE": "hgx-h200", "KUBEGPU_FAKE_NVML_PYTHON": sys.executable})
    args = [sys.executable, "-c", PROBE, str(node.driver_root), str(tmp_path / "none"), str(node.sysfs_root)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])["gpus"] == 8


def test_a_malformed_machine_file_fails_nvml_init_and_says_where(node: harness.FakeNode, tmp_path: Path) -> None:
    node.profile_json.write_text('{"gpus": [1, 2,, 3]}')
    env = {**{k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}, **node.env}
    args = [sys.executable, "-c", PROBE, str(node.driver_root), str(tmp_path / "none"), str(node.sysfs_root)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])["code"] == decode.ERROR_UNKNOWN
    assert f"{node.profile_json}: JSON error at offset 15" in done.stderr
