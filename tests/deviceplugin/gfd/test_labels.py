"""GPU feature discovery labels (reference section i) and the ``kubegpu labels`` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.deviceplugin.gfd import labels
from tests.deviceplugin.fixtures.build import machine, plugin_config, profile
from tests.polling import wait_until


def label(
    machine_name: str, argv: list[str] | None = None, text: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    return labels.labels(
        profile(machine_name), plugin_config(argv, text=text), machine_type="NVIDIA DGX A100", timestamp=timestamp
    )


N = "nvidia.com/"
TS4 = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}"
SCENARIOS = [
    ("whole_gpus", "dgx-a100", [], None, {
        "gpu.product": "NVIDIA-A100-SXM4-80GB", "gpu.count": "8", "gpu.memory": "81920", "gpu.family": "ampere",
        "gpu.compute.major": "8", "gpu.compute.minor": "0", "gpu.replicas": "1", "gpu.sharing-strategy": "none",
        "gpu.mode": "compute", "gpu.machine": "NVIDIA-DGX-A100", "mig.capable": "true", "mps.capable": "false",
        "cuda.driver-version.full": "550.107.02", "cuda.driver.major": "550", "cuda.driver.minor": "107",
        "cuda.driver.rev": "02", "cuda.runtime-version.full": "12.4", "cuda.runtime.major": "12",
    }, ["mig.strategy", "gfd.timestamp"]),
    ("turing_t4", "pcie-4xt4", [], None, {
        "gpu.product": "Tesla-T4", "gpu.family": "turing", "gpu.compute.minor": "5", "mig.capable": "false",
        "cuda.driver-version.revision": "01", "cuda.runtime-version.minor": "2",
    }, []),
    ("volta_v100", "dgx1-v100", [], None, {"gpu.family": "volta", "gpu.compute.major": "7"}, []),
    ("time_slicing_count_is_physical", "dgx-a100", [], TS4, {
        "gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED", "gpu.count": "8", "gpu.replicas": "4",
        "gpu.sharing-strategy": "time-slicing",
    }, []),
    ("renamed_shared_has_no_suffix", "dgx-a100", [],
     "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}",
     {"gpu.product": "NVIDIA-A100-SXM4-80GB", "gpu.replicas": "4", "gpu.sharing-strategy": "time-slicing"}, []),
    ("mps", "dgx-a100", ["--mps-root", "/m"], "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
     {"mps.capable": "true", "gpu.sharing-strategy": "mps", "gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED"}, []),
    ("mig_single_valid", "a100-mig-single", ["--mig-strategy", "single"], None, {
        "mig.strategy": "single", "gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "gpu.count": "56",
        "gpu.replicas": "1", "gpu.memory": "9856", "gpu.multiprocessors": "14", "gpu.slices.gi": "1",
        "gpu.slices.ci": "1", "gpu.engines.copy": "1", "gpu.engines.decoder": "0", "gpu.family": "ampere",
    }, []),
    ("mig_single_mixed_enabled_is_invalid", "a100-mig-single-invalid", ["--mig-strategy", "single"], None, {
        "gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-INVALID", "gpu.count": "0", "gpu.replicas": "0",
        "gpu.memory": "0", "gpu.sharing-strategy": "",
    }, []),
    ("mig_single_several_profiles_is_invalid", "a100-mig", ["--mig-strategy", "single"], None,
     {"gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-INVALID", "gpu.count": "0"}, []),
    ("mig_mixed_per_profile", "a100-mig", ["--mig-strategy", "mixed"], None, {
        "mig.strategy": "mixed", "gpu.count": "8", "mig-1g.10gb.count": "15", "mig-7g.80gb.count": "1",
        "mig-3g.40gb.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "mig-3g.40gb.memory": "40192",
        "mig-7g.80gb.engines.ofa": "1", "mig-2g.20gb.replicas": "1", "mig-2g.20gb.sharing-strategy": "none",
    }, ["gpu.multiprocessors"]),
    ("mig_mixed_shared_profile", "a100-mig", ["--mig-strategy", "mixed"],
     "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}",
     {"mig-1g.10gb.replicas": "3", "mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED",
      "mig-1g.10gb.count": "15", "gpu.replicas": "1"}, []),
    ("mig_mixed_media_extension_profile", "mig-odd-profiles", ["--mig-strategy", "mixed"],
     "resources: {mig: [{pattern: '1c.*', name: mig-1c}]}",
     {"mig-1g.10gb.me.count": "1", "mig-1g.10gb.me.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gbme",
      "mig-1c.count": "1"}, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine_name", "argv", "text", "expected", "absent"),
    [s[1:] for s in SCENARIOS],
    ids=[s[0] for s in SCENARIOS],
)
def test_labels_as_gpu_feature_discovery_writes_them(
    machine_name: str, argv: list[str], text: str | None, expected: dict[str, str], absent: list[str]
) -> None:
    got = label(machine_name, argv, text)
    assert {k: got.get(N + k) for k in expected} == expected
    assert [k for k in absent if N + k in got] == []


def test_timestamp_only_when_given() -> None:
    assert label("dgx-a100", timestamp=1724632719)["nvidia.com/gfd.timestamp"] == "1724632719"


@pytest.mark.parametrize(
    ("cc", "family"),
    [("8.9", "ada-lovelace"), ("9.0", "hopper"), ("10.0", "blackwell"), ("12.0", "blackwell"), ("13.0", "rubin"),
     ("4.0", "undefined"), ("6.1", "pascal")],
    ids=["ada", "hopper", "blackwell_10", "blackwell_12", "rubin", "undefined", "pascal"],
)  # fmt: skip
def test_family_from_compute_capability(cc: str, family: str) -> None:
    m = machine({}, defaults={"product_name": "GPU X", "memory_mib": 1024, "compute_capability": cc})
    assert labels.labels(m, plugin_config(), machine_type="", timestamp=None)["nvidia.com/gpu.family"] == family


def test_compute_capability_zero_has_no_architecture_labels() -> None:
    m = machine({}, defaults={"product_name": "GPU X", "memory_mib": 1024, "compute_capability": "0.0"})
    got = labels.labels(m, plugin_config(), machine_type="", timestamp=None)
    assert not {"nvidia.com/gpu.family", "nvidia.com/gpu.compute.major"} & set(got)
    assert got["nvidia.com/gpu.machine"] == "unknown"


@pytest.mark.parametrize(
    ("classes", "mode"),
    [((0x0302, 0x0302), "compute"), ((0x0300, 0x0300), "graphics"), ((0x0300, 0x0302), "unknown")],
    ids=["compute", "graphics", "mixed_classes"],
)
def test_mode_from_pci_class(classes: tuple[int, int], mode: str) -> None:
    defaults = {"product_name": "GPU X", "memory_mib": 1024, "compute_capability": "8.6"}
    m = machine(*({"pci_class": c} for c in classes), defaults=defaults)
    assert labels.labels(m, plugin_config(), machine_type="", timestamp=None)["nvidia.com/gpu.mode"] == mode


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"), ("Tesla T4", "Tesla-T4"), ("1g.10gb+me", "1g.10gbme"),
     ("  NVIDIA  DGX (H100) ", "NVIDIA-DGX-H100"), ("PowerEdge R740/xd", "PowerEdge-R740xd")],
    ids=["a100", "t4", "plus_dropped", "spaces_and_parens", "slash_dropped"],
)  # fmt: skip
def test_sanitise(raw: str, clean: str) -> None:
    assert labels.sanitise(raw) == clean


def test_mps_with_mig_enabled_gpus_is_an_error() -> None:
    cfg = plugin_config(["--mps-root", "/m"], text="sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}")
    with pytest.raises(labels.LabelError, match="MIG-enabled"):
        labels.labels(profile("a100-mig"), cfg, machine_type="", timestamp=None)


def test_a_bad_driver_version_is_an_error() -> None:
    import dataclasses

    m = dataclasses.replace(profile("dgx-a100"), driver_version="r550")
    with pytest.raises(labels.LabelError, match=r"X\.Y\[\.Z\]"):
        labels.labels(m, plugin_config(), machine_type="", timestamp=None)


def test_feature_file_is_key_value_lines() -> None:
    assert labels.feature_file({"a/b": "1", "c/d": ""}) == "a/b=1\nc/d=\n"


# --- the command ----------------------------------------------------------------------------


def kubegpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_labels_oneshot_to_stdout_acceptance() -> None:
    result = kubegpu("labels", "--machine", "dgx-a100", "--oneshot", "--use-node-feature-api=false", "--output", "-")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "nvidia.com/gpu.count=8" in lines
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in lines
    assert any(line.startswith("nvidia.com/gfd.timestamp=") for line in lines)


def test_labels_oneshot_to_a_file_with_config_and_env(tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("version: v1\nflags: {gfd: {noTimestamp: true}}\n")
    machine_type = tmp_path / "product_name"
    machine_type.write_text("NVIDIA DGX H100\n")
    out = tmp_path / "features.d" / "gfd"
    result = kubegpu(
        "labels", "--machine", "a100-mig", "--config-file", str(config_file), "--oneshot", "-o", str(out),
        "--machine-type-file", str(machine_type), env={"GFD_MIG_STRATEGY": "mixed", "USE_NODE_FEATURE_API": "false"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert "nvidia.com/mig.strategy=mixed" in lines
    assert "nvidia.com/gpu.machine=NVIDIA-DGX-H100" in lines
    assert not any(line.startswith("nvidia.com/gfd.timestamp") for line in lines)
    assert [p.name for p in out.parent.iterdir()] == ["gfd"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--machine", "nope"], 2, "unknown machine profile 'nope'"),
        (["--machine", "dgx-a100", "--mig-strategy", "some"], 2, "unknown MIG strategy: some"),
        (["--machine", "dgx-a100", "--sleep-interval", "60"], 2, "missing unit in duration"),
    ],
    ids=["unknown_profile", "bad_mig_strategy", "duration_without_unit"],
)
def test_labels_bad_input_exits_2(args: list[str], code: int, message: str) -> None:
    result = kubegpu("labels", *args, "--oneshot", "--use-node-feature-api", "false", "--output", "-")
    assert result.returncode == code
    assert message in result.stderr


def start_loop(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--use-node-feature-api=false", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_loop_relabels_reloads_on_sighup_and_removes_the_file_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "gfd"
    config_file = tmp_path / "config.yaml"
    config_file.write_text("flags: {migStrategy: none}\n")
    proc = start_loop("--sleep-interval", "200ms", "--output", str(out), "--config-file", str(config_file))
    try:
        wait_until(out.exists, within=60.0)
        first = out.stat().st_ino
        wait_until(lambda: out.exists() and out.stat().st_ino != first, within=60.0)  # rewritten by the next round
        assert "nvidia.com/mig.strategy" not in out.read_text()
        config_file.write_text("flags: {migStrategy: mixed}\n")
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: out.exists() and "nvidia.com/mig.strategy=mixed" in out.read_text(), within=60.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not out.exists()
    finally:
        proc.kill()
        proc.wait()


def test_infinite_interval_labels_once_and_keeps_the_file(tmp_path: Path) -> None:
    out = tmp_path / "gfd"
    proc = start_loop("--sleep-interval", "infinite", "--output", str(out))
    try:
        wait_until(out.exists, within=60.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert "nvidia.com/gpu.count=8" in out.read_text()
    finally:
        proc.kill()
        proc.wait()


def test_readme_gfd_table_lists_every_flag_with_its_env_vars() -> None:
    from kubegpu.deviceplugin.config import effective

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    table = readme[readme.index("| GFD flag (aliases) |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = {}
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in cells[0].replace("(", " ").replace(")", " ").replace(",", " ").split():
            rows[name.strip("`")] = cells[1]
    for spec in effective.GFD_FLAGS:
        if spec.dest == "machine":
            continue
        documented = [n for n in spec.names if n in rows]
        assert documented, f"{spec.names[0]} is not in README's GFD table"
        for env in spec.envs:
            assert f"`{env}`" in rows[documented[0]], f"{env} of {spec.names[0]} is not in README's GFD table"
