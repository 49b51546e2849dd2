"""CDI specs: built as NVIDIA's plugin builds them, valid against the official schema and our stricter model,
written atomically, and generated offline by ``kubegpu cdi generate``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from kubegpu.deviceplugin.cdi import generate, hostfiles, schema, writer
from kubegpu.deviceplugin.cdi.schema import CdiError
from kubegpu.deviceplugin.rm import mig_caps, resource_map, responses
from tests.deviceplugin.fixtures.build import FIXTURES, plugin_config, profile
from tests.shared import shared_path

SCHEMA_DIR = ("schemas", "cdi")


@pytest.fixture(scope="module")
def official() -> Draft7Validator:
    """The official CDI schema; schema.json refers to defs.json by relative URI."""
    schemas = shared_path(*SCHEMA_DIR)
    defs = json.loads((schemas / "defs.json").read_text())
    registry: Registry[Any] = Registry().with_resource(
        "defs.json", Resource.from_contents(defs, default_specification=DRAFT7)
    )
    return Draft7Validator(json.loads((schemas / "schema.json").read_text()), registry=registry)


def schema_errors(validator: Draft7Validator, document: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(document)]


def test_the_official_examples_behave_as_upstream_says(official: Draft7Validator) -> None:
    for good in sorted((shared_path(*SCHEMA_DIR) / "testdata" / "good").glob("*.json")):
        assert schema_errors(official, json.loads(good.read_text())) == [], good.name
    assert len(schema_errors(official, {})) == 3


CASES = [
    ("dgx_uuid", "dgx-a100", []),
    ("dgx_index_with_dev_root", "dgx-a100", ["--device-id-strategy", "index", "--dev-root", "/run/nvidia/driver"]),
    ("mig_mixed", "a100-mig", ["--mig-strategy", "mixed"]),
    ("mig_single_index", "a100-mig-single", ["--mig-strategy", "single", "--device-id-strategy", "index"]),
    ("mig_none", "a100-mig", []),
    ("imex_and_hooks_off", "pcie-4xt4", ["--imex-channel-ids", "0", "--cdi-disable-hooks", "all"]),
]


@pytest.mark.parametrize(("machine", "argv"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_generated_specs_pass_the_official_schema_and_the_strict_model(
    official: Draft7Validator, machine: str, argv: list[str]
) -> None:
    for spec in generate.specs(profile(machine), plugin_config(argv)):
        document = spec.to_dict()
        assert schema_errors(official, document) == []
        assert schema.parse(json.loads(json.dumps(document))) == spec


def test_every_name_the_plugin_hands_out_is_a_device_of_the_spec() -> None:
    for machine, argv in [
        ("a100-mig", ["--mig-strategy", "mixed", "--device-id-strategy", "index"]),
        ("a100-mig", ["--mig-strategy", "none"]),
        ("a100-mig-single", ["--mig-strategy", "single"]),
    ]:
        m = profile(machine)
        cfg = plugin_config([*argv, "--device-list-strategy", "cdi-cri"])
        names = set(generate.gpu_spec(m, generate.CdiOptions.from_config(cfg)).qualified_names())
        options = responses.ResponseOptions.from_config(cfg)
        for resource in resource_map.build(m, cfg):
            for device in resource.devices:
                edits = responses.container_edits(resource, [device.id], options, exists=lambda p: False)
                assert set(edits.cdi_devices) <= names, (machine, device.id)


def test_one_device_per_whole_gpu_and_per_mig_device_named_by_uuid() -> None:
    m = profile("a100-mig")
    spec = generate.gpu_spec(m, generate.CdiOptions(mig_strategy="mixed"))
    expected = [g.uuid for g in m.gpus if not g.mig_enabled] + [d.uuid for d in m.mig_devices()]
    assert sorted(d.name for d in spec.devices) == sorted(expected)
    assert spec.kind == "k8s.device-plugin.nvidia.com/gpu"


def test_index_names_and_mig_capability_nodes_from_the_minors_table() -> None:
    m = profile(str(FIXTURES / "mig-empty.yaml"))
    minors = mig_caps.parse("gpu0/gi1/access 30\ngpu0/gi1/ci0/access 31\ngpu0/gi2/access 40\ngpu0/gi2/ci0/access 41\n")
    spec = generate.gpu_spec(m, generate.CdiOptions(mig_strategy="mixed", device_id_strategy="index"), minors=minors)
    assert [d.name for d in spec.devices] == ["0:0", "0:1"]
    assert [n.path for n in spec.devices[1].container_edits.device_nodes or ()] == [
        "/dev/nvidia0",
        "/dev/nvidia-caps/nvidia-cap40",
        "/dev/nvidia-caps/nvidia-cap41",
    ]
    assert spec.cdi_version == "0.5.0"  # names starting with a digit need 0.5.0


def test_mig_strategy_none_keeps_a_whole_gpu_device_for_mig_enabled_gpus() -> None:
    m = profile("a100-mig")
    names = {d.name for d in generate.gpu_spec(m, generate.CdiOptions(mig_strategy="none")).devices}
    assert {g.uuid for g in m.gpus} <= names


VERSIONS = [
    ("uuid_names_no_host_path", generate.CdiOptions(), "0.3.0"),
    ("host_path_under_dev_root", generate.CdiOptions(dev_root="/run/nvidia/driver"), "0.5.0"),
    ("index_names", generate.CdiOptions(device_id_strategy="index"), "0.5.0"),
]


@pytest.mark.parametrize(("options", "version"), [v[1:] for v in VERSIONS], ids=[v[0] for v in VERSIONS])
def test_the_spec_version_is_the_oldest_that_expresses_it(options: generate.CdiOptions, version: str) -> None:
    assert generate.gpu_spec(profile("pcie-4xt4"), options).cdi_version == version


def test_common_edits_control_nodes_void_env_and_host_paths() -> None:
    options = generate.CdiOptions(dev_root="/run/nvidia/driver")
    host = generate.HostFiles(control_nodes=("/dev/nvidiactl", "/dev/nvidia-uvm"))
    common = generate.gpu_spec(profile("pcie-4xt4"), options, host).container_edits
    assert common is not None
    assert common.env == ("NVIDIA_VISIBLE_DEVICES=void",)
    assert [(n.path, n.host_path) for n in common.device_nodes or ()] == [
        ("/dev/nvidia-uvm", "/run/nvidia/driver/dev/nvidia-uvm"),
        ("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl"),
    ]


def test_driver_libraries_are_mounted_from_the_driver_root_and_hooks_point_at_the_hook_path() -> None:
    lib = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.107.02"
    host = generate.HostFiles(
        libraries=(lib,), symlinks=(("libcuda.so.550.107.02", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),)
    )
    options = generate.CdiOptions(driver_root="/run/nvidia/driver", hook_path="/usr/local/bin/nvidia-cdi-hook")
    common = generate.gpu_spec(profile("dgx-a100"), options, host).container_edits
    assert common is not None and common.mounts and common.hooks
    assert (common.mounts[0].host_path, common.mounts[0].container_path) == ("/run/nvidia/driver" + lib, lib)
    args = {h.args[1]: h.args for h in common.hooks if h.args}
    assert set(args) == set(generate.HOOKS)
    assert args["update-ldcache"] == ("nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu")
    assert all(h.path == "/usr/local/bin/nvidia-cdi-hook" for h in common.hooks)


@pytest.mark.parametrize(
    ("disabled", "left"),
    [((), {"enable-cuda-compat", "disable-device-node-modification"}),
     (("enable-cuda-compat",), {"disable-device-node-modification"}),
     (("all",), set())],
    ids=["none_disabled", "one_disabled", "all_disabled"],
)  # fmt: skip
def test_cdi_disable_hooks(disabled: tuple[str, ...], left: set[str]) -> None:
    common = generate.gpu_spec(profile("pcie-4xt4"), generate.CdiOptions(disabled_hooks=disabled)).container_edits
    assert common is not None
    assert {h.args[2] for h in common.hooks or () if h.args} == left


def test_imex_and_feature_specs_are_written_only_when_not_empty() -> None:
    cfg = plugin_config(["--imex-channel-ids", "0", "--gdrcopy-enabled", "--gds-enabled"])
    kinds = [
        s.kind for s in generate.specs(profile("pcie-4xt4"), cfg, generate.HostFiles(gdrcopy_nodes=("/dev/gdrdrv",)))
    ]
    assert kinds == [
        "k8s.device-plugin.nvidia.com/gpu",
        "k8s.device-plugin.nvidia.com/imex-channel",
        "k8s.device-plugin.nvidia.com/gdrcopy",
    ]


# --- the strict model: what the official schema lets through ---------------------------------

GOOD: dict[str, Any] = {
    "cdiVersion": "0.5.0",
    "kind": "example.com/gpu",
    "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/x", "hostPath": "/h/dev/x"}]}}],
    "containerEdits": {"env": ["A=1"]},
}


def variant(path: str, value: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(json.dumps(GOOD))
    node: Any = document
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[parts[-1]] = value
    return document


STRICT = [
    ("env_without_equals", variant("containerEdits.env", ["JUSTAKEY"]), "must be KEY=VALUE", True),
    ("unknown_top_key", variant("extra", 1), "extra: unknown key", True),
    ("unknown_edit_key", variant("containerEdits.devices", []), "containerEdits.devices: unknown key", True),
    ("bad_hook_name", variant("containerEdits.hooks", [{"hookName": "beforeStart", "path": "/x"}]),
     "invalid hook name", True),
    ("bad_permissions", variant("devices.0.containerEdits.deviceNodes", [{"path": "/dev/x", "permissions": "rx"}]),
     "invalid device node permissions", True),
    ("duplicate_names", variant("devices", [GOOD["devices"][0], GOOD["devices"][0]]), "duplicate device names: 0",
     True),
    ("host_path_needs_0_5_0", variant("cdiVersion", "0.3.0"), "too old for this content: it needs 0.5.0", True),
    ("bad_kind", variant("kind", "gpu"), "invalid kind 'gpu'", True),
    ("no_devices", variant("devices", []), "at least one device", True),
    ("relative_node_path", variant("devices.0.containerEdits.deviceNodes", [{"path": "dev/x"}]), "must be absolute",
     True),
    ("bad_device_name", variant("devices.0.name", "-x"), "invalid device name '-x'", True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("document", "message", "official_passes"), [s[1:] for s in STRICT], ids=[s[0] for s in STRICT]
)
def test_the_strict_model_rejects_what_the_go_loader_rejects(
    official: Draft7Validator, document: dict[str, Any], message: str, official_passes: bool
) -> None:
    assert schema.parse(GOOD).kind == "example.com/gpu"
    with pytest.raises(CdiError, match=message):
        schema.parse(document)
    assert (schema_errors(official, document) == []) is official_passes


# --- writing --------------------------------------------------------------------------------


def test_write_is_atomic_and_leaves_only_the_spec(tmp_path: Path) -> None:
    spec = generate.gpu_spec(profile("dgx-a100"), generate.CdiOptions())
    path = writer.write(spec, tmp_path / "cdi")
    assert path.name == "k8s.device-plugin.nvidia.com-gpu.json"
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert schema.parse_text(path.read_text()) == spec


def test_rewriting_replaces_the_file_in_one_step(tmp_path: Path) -> None:
    first = writer.write(generate.gpu_spec(profile("dgx-a100"), generate.CdiOptions()), tmp_path)
    inode = first.stat().st_ino
    second = writer.write(generate.gpu_spec(profile("pcie-4xt4"), generate.CdiOptions()), tmp_path)
    assert second == first and second.stat().st_ino != inode
    assert len(schema.parse_text(second.read_text()).devices) == 4


def test_write_all_removes_our_specs_that_are_no_longer_generated(tmp_path: Path) -> None:
    machine = profile("pcie-4xt4")
    writer.write_all(generate.specs(machine, plugin_config(["--imex-channel-ids", "0"])), tmp_path)
    (tmp_path / "other-vendor.json").write_text("{}")
    writer.write_all(generate.specs(machine, plugin_config()), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k8s.device-plugin.nvidia.com-gpu.json", "other-vendor.json"]


def test_discover_finds_control_nodes_libraries_and_feature_nodes(tmp_path: Path) -> None:
    dev, driver = tmp_path / "dev-root", tmp_path / "driver-root"
    for rel in ("dev/nvidiactl", "dev/nvidia-uvm", "dev/gdrdrv", "dev/nvidia-fs0", "dev/nvidia-fs1"):
        (dev / rel).parent.mkdir(parents=True, exist_ok=True)
        (dev / rel).touch()
    lib = driver / "usr/lib64/libcuda.so.550.107.02"
    lib.parent.mkdir(parents=True)
    lib.touch()
    host = hostfiles.discover(driver, dev, "550.107.02")
    assert host.control_nodes == ("/dev/nvidia-uvm", "/dev/nvidiactl")
    assert host.libraries == ("/usr/lib64/libcuda.so.550.107.02",)
    assert host.symlinks == (("libcuda.so.550.107.02", "/usr/lib64/libcuda.so.1"),)
    assert (host.gdrcopy_nodes, host.gds_nodes, host.mofed_nodes) == (
        ("/dev/gdrdrv",),
        ("/dev/nvidia-fs0", "/dev/nvidia-fs1"),
        (),
    )


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


def test_cdi_generate_writes_a_spec_that_passes_the_official_schema(tmp_path: Path, official: Draft7Validator) -> None:
    out = tmp_path / "cdi"
    result = kubegpu("cdi", "generate", "--machine", "dgx-a100", "--output", str(out))
    assert result.returncode == 0, result.stderr
    spec_file = out / "k8s.device-plugin.nvidia.com-gpu.json"
    assert f"wrote {spec_file}" in result.stdout
    document = json.loads(spec_file.read_text())
    assert schema_errors(official, document) == []
    assert len(document["devices"]) == 8
    check = kubegpu("cdi", "validate", str(spec_file))
    assert check.returncode == 0 and "ok (k8s.device-plugin.nvidia.com/gpu" in check.stdout


def test_cdi_generate_takes_flags_env_and_prints_to_stdout(tmp_path: Path) -> None:
    result = kubegpu(
        "cdi",
        "generate",
        "--machine",
        "a100-mig",
        "--output",
        "-",
        env={"MIG_STRATEGY": "mixed", "DEVICE_ID_STRATEGY": "index"},
    )
    assert result.returncode == 0, result.stderr
    names = [d["name"] for d in json.loads(result.stdout)["devices"]]
    assert names[:3] == ["0", "1", "2:0"] and len(names) == 2 + 23


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--machine", "no-such-machine"], "unknown machine profile 'no-such-machine'"),
        (["--machine", "dgx-a100", "--device-id-strategy", "serial"], "invalid --device-id-strategy option: serial"),
    ],
    ids=["unknown_profile", "bad_flag"],
)
def test_cdi_generate_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = kubegpu("cdi", "generate", *args, "--output", str(tmp_path))
    assert result.returncode == 2
    assert message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_cdi_validate_reports_a_bad_spec_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(variant("containerEdits.env", ["NOVALUE"])))
    result = kubegpu("cdi", "validate", str(bad))
    assert result.returncode == 1
    assert "containerEdits.env: invalid env entry 'NOVALUE': must be KEY=VALUE" in result.stderr


@pytest.mark.parametrize("target", ["missing.json", "binary.json", "."], ids=["missing", "binary", "directory"])
def test_cdi_validate_on_a_file_it_cannot_read_exits_2_with_one_line(tmp_path: Path, target: str) -> None:
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x80")
    result = subprocess.run(
        [sys.executable, "-m", "kubegpu", "cdi", "validate", target], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
