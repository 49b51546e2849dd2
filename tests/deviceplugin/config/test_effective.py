"""NVIDIA-compatible config: flags, env vars, file, precedence, validation texts and the effective JSON."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.config import effective, flags, v1
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.plugin import command


def load(argv: list[str] | None = None, env: dict[str, str] | None = None) -> effective.Config:
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    return effective.load(parser.parse_args(argv or []), env or {})


def with_file(tmp_path: Path, text: str, argv: list[str] | None = None, env: dict[str, str] | None = None) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load(["--config-file", str(path), *(argv or [])], env)


def dig(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data[part]
    return data


# --- defaults, aliases, precedence ----------------------------------------------------------

DEFAULTS = [
    ("flags.migStrategy", "none"),
    ("flags.failOnInitError", True),
    ("flags.nvidiaDriverRoot", "/"),
    ("flags.nvidiaDevRoot", "/"),
    ("flags.mpsRoot", ""),
    ("flags.gdrcopyEnabled", False),
    ("flags.gdsEnabled", False),
    ("flags.mofedEnabled", False),
    ("flags.deviceDiscoveryStrategy", "auto"),
    ("flags.plugin.passDeviceSpecs", False),
    ("flags.plugin.deviceListStrategy", ["envvar"]),
    ("flags.plugin.deviceIDStrategy", "uuid"),
    ("flags.plugin.cdiAnnotationPrefix", "cdi.k8s.io/"),
    ("flags.plugin.nvidiaCTKPath", "/usr/bin/nvidia-ctk"),
    ("flags.plugin.containerDriverRoot", "/driver-root"),
    ("flags.plugin.sharedDevicesAllocationPolicy", "distributed"),
    ("flags.plugin.healthRecoveryQuietPeriod", "0s"),
    ("flags.plugin.healthRecoveryXids", "all"),
    ("flags.gfd.sleepInterval", "1m0s"),
    ("flags.gfd.outputFile", "/etc/kubernetes/node-feature-discovery/features.d/gfd"),
    ("resources.gpus", [{"pattern": "*", "name": "nvidia.com/gpu"}]),
    ("imex.channelIDs", []),
]


@pytest.mark.parametrize(("key", "expected"), DEFAULTS, ids=[k for k, _ in DEFAULTS])
def test_defaults_match_nvidia(key: str, expected: Any) -> None:
    assert dig(load().to_dict(), key) == expected


def test_command_line_only_defaults() -> None:
    options = load().options
    assert options.kubelet_socket == "/var/lib/kubelet/device-plugins/kubelet.sock"
    assert options.cdi_spec_dir == "/var/run/cdi"
    assert options.config_file is None and options.machine is None
    assert options.cdi_disable_hooks == ()


PRECEDENCE = [
    # (cli, env, file, expected) for --mig-strategy / MIG_STRATEGY / flags.migStrategy
    ("mixed", "single", "single", "mixed"),
    (None, "single", "mixed", "single"),
    (None, None, "mixed", "mixed"),
    (None, None, None, "none"),
    ("none", None, "mixed", "none"),
]


@pytest.mark.parametrize(
    ("cli", "env", "file", "expected"),
    PRECEDENCE,
    ids=[
        "cli_beats_env_and_file",
        "env_beats_file",
        "file_beats_default",
        "default_when_nothing_set",
        "explicit_cli_default_value_beats_file",
    ],
)
def test_precedence_cli_then_env_then_file_then_default(
    tmp_path: Path, cli: str | None, env: str | None, file: str | None, expected: str
) -> None:
    text = f"version: v1\nflags: {{migStrategy: {file}}}\n" if file else "version: v1\n"
    argv = ["--mig-strategy", cli] if cli else []
    environ = {"MIG_STRATEGY": env} if env else {}
    assert with_file(tmp_path, text, argv, environ).flags.mig_strategy == expected


def test_config_file_comes_from_the_env_when_no_flag(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("flags: {migStrategy: mixed}\n")
    assert load([], {"CONFIG_FILE": str(path)}).flags.mig_strategy == "mixed"


ALIASES = [
    (["--nvidia-driver-root", "/run/nvidia/driver"], {}, "nvidia_driver_root", "/run/nvidia/driver"),
    (["--driver-root", "/run/nvidia/driver"], {}, "nvidia_driver_root", "/run/nvidia/driver"),
    (["--nvidia-dev-root", "/host"], {}, "nvidia_dev_root", "/host"),
    ([], {"NVIDIA_CTK_PATH": "/x/nvidia-ctk"}, "plugin.nvidia_ctk_path", "/x/nvidia-ctk"),
    (
        [],
        {"NVIDIA_CDI_HOOK_PATH": "/a/nvidia-cdi-hook", "NVIDIA_CTK_PATH": "/b/nvidia-ctk"},
        "plugin.nvidia_ctk_path",
        "/a/nvidia-cdi-hook",
    ),
    (["--nvidia-cdi-hook-path", "/c/hook"], {}, "plugin.nvidia_ctk_path", "/c/hook"),
    (["--container-driver-root", "/dr"], {}, "plugin.container_driver_root", "/dr"),
    ([], {"DRIVER_ROOT_CTR_PATH": "/dr2"}, "plugin.container_driver_root", "/dr2"),
]


@pytest.mark.parametrize(
    ("argv", "env", "attr", "expected"),
    ALIASES,
    ids=[
        "nvidia_driver_root_alias",
        "driver_root_flag",
        "nvidia_dev_root_alias",
        "ctk_path_env",
        "cdi_hook_env_listed_first_wins",
        "cdi_hook_path_flag",
        "container_driver_root_alias",
        "driver_root_ctr_path_env",
    ],
)
def test_flag_and_env_aliases(argv: list[str], env: dict[str, str], attr: str, expected: str) -> None:
    value: Any = load(argv, env).flags
    for part in attr.split("."):
        value = getattr(value, part)
    assert value == expected


LIST_STRATEGY = [
    ("file_string", "flags: {plugin: {deviceListStrategy: volume-mounts}}", [], {}, ("volume-mounts",)),
    ("file_list", "flags: {plugin: {deviceListStrategy: [envvar, cdi-cri]}}", [], {}, ("envvar", "cdi-cri")),
    ("env_comma_list", "", [], {"DEVICE_LIST_STRATEGY": "envvar, cdi-annotations"}, ("envvar", "cdi-annotations")),
    ("flag_repeated", "", ["--device-list-strategy", "envvar", "--device-list-strategy", "cdi-cri"], {},
     ("envvar", "cdi-cri")),
    ("flag_comma", "", ["--device-list-strategy=cdi-cri,volume-mounts"], {}, ("cdi-cri", "volume-mounts")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "argv", "env", "expected"), [r[1:] for r in LIST_STRATEGY], ids=[r[0] for r in LIST_STRATEGY]
)
def test_device_list_strategy_is_a_string_or_a_list(
    tmp_path: Path, text: str, argv: list[str], env: dict[str, str], expected: tuple[str, ...]
) -> None:
    assert with_file(tmp_path, text, argv, env).flags.plugin.device_list_strategy == expected


BOOLS = [
    (["--pass-device-specs"], {}, True),
    (["--pass-device-specs=false"], {}, False),
    (["--pass-device-specs", "true"], {}, True),
    ([], {"PASS_DEVICE_SPECS": "1"}, True),
    ([], {"PASS_DEVICE_SPECS": "T"}, True),
    ([], {"PASS_DEVICE_SPECS": "False"}, False),
    (["--pass-device-specs=false"], {"PASS_DEVICE_SPECS": "true"}, False),
]


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    BOOLS,
    ids=["bare_flag", "flag_eq_false", "flag_space_true", "env_1", "env_T", "env_False", "flag_beats_env"],
)
def test_bool_flags_parse_like_go(argv: list[str], env: dict[str, str], expected: bool) -> None:
    assert load(argv, env).flags.plugin.pass_device_specs is expected


def test_bad_bool_in_env_names_the_env_var() -> None:
    with pytest.raises(ConfigError, match=r'env PASS_DEVICE_SPECS: could not parse "maybe" as bool value'):
        load([], {"PASS_DEVICE_SPECS": "maybe"})


def test_dev_root_defaults_to_the_driver_root() -> None:
    assert load(["--driver-root", "/run/nvidia/driver"]).flags.nvidia_dev_root == "/run/nvidia/driver"
    assert load(["--driver-root", "/a", "--dev-root", "/b"]).flags.nvidia_dev_root == "/b"


def test_imex_channel_ids_from_flag_and_env() -> None:
    assert load(["--imex-channel-ids", "0"]).imex.channel_ids == (0,)
    assert load([], {"IMEX_CHANNEL_IDS": "0", "IMEX_REQUIRED": "true"}).imex.required is True


# --- sharing post-processing ----------------------------------------------------------------

SHARING = [
    ("mps_fail_defaults_true", "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", "mps", True),
    ("mps_explicit_false_is_honoured",
     "sharing: {mps: {failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 2}]}}", "mps", False),
    ("time_slicing_fail_defaults_unset", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}",
     "time-slicing", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "strategy", "fail"), [r[1:] for r in SHARING], ids=[r[0] for r in SHARING])
def test_fail_requests_greater_than_one_defaults(tmp_path: Path, text: str, strategy: str, fail: bool | None) -> None:
    cfg = with_file(tmp_path, text, ["--mps-root", "/run/nvidia/mps"])
    assert cfg.sharing_strategy == strategy
    assert cfg.replicated.fail_requests_greater_than_one is fail


def test_rename_by_default_renames_only_resources_without_a_rename(tmp_path: Path) -> None:
    text = """
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - {name: gpu, replicas: 4}
    - {name: mig-1g.10gb, replicas: 2, rename: small}
"""
    cfg = with_file(tmp_path, text)
    assert [(r.name, r.rename) for r in cfg.sharing.time_slicing.resources] == [
        ("nvidia.com/gpu", "nvidia.com/gpu.shared"),
        ("nvidia.com/mig-1g.10gb", "nvidia.com/small"),
    ]


def test_mps_block_wins_over_time_slicing(tmp_path: Path) -> None:
    text = """
sharing:
  timeSlicing: {resources: [{name: gpu, replicas: 2}]}
  mps: {resources: [{name: gpu, replicas: 3}]}
"""
    cfg = with_file(tmp_path, text, ["--mps-root", "/m"])
    assert cfg.sharing_strategy == "mps"
    assert cfg.replicated is cfg.sharing.mps


def test_mig_single_gets_a_catch_all_mig_pattern() -> None:
    assert load(["--mig-strategy", "single"]).resources.mig[-1].name == "nvidia.com/gpu"
    assert load(["--mig-strategy", "mixed"]).resources.mig == ()


# --- file validation (texts of section b; unknown keys name their path) ---------------------

FILE_ERRORS = [
    ("typo_in_replicas_names_the_key", "sharing: {timeSlicing: {resources: [{name: gpu, replica: 4}]}}",
     "sharing.timeSlicing.resources[0].replica: unknown key"),
    ("one_replica_is_refused", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}",
     "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
    ("missing_replicas", "sharing: {timeSlicing: {resources: [{name: gpu}]}}",
     "sharing.timeSlicing.resources[0]: no replicas specified"),
    ("missing_name", "sharing: {mps: {resources: [{replicas: 2}]}}",
     "sharing.mps.resources[0]: no resource name specified"),
    ("no_resources", "sharing: {timeSlicing: {renameByDefault: true}}", "sharing.timeSlicing: no resources specified"),
    ("empty_resources", "sharing: {timeSlicing: {resources: []}}", "sharing.timeSlicing: no resources specified"),
    ("invalid_resource_name", "sharing: {timeSlicing: {resources: [{name: $invalid$, replicas: 2}]}}",
     "incorrect format for resource name 'nvidia.com/$invalid$'"),
    ("too_long_resource_name", "resources: {gpus: [{pattern: '*', name: " + "a" * 60 + "}]}",
     "fully-qualified resource name must be 63 characters or less"),
    ("pattern_required", "resources: {gpus: [{name: gpu}]}",
     "resources.gpus[0]: resources must have a 'pattern' field set"),
    ("name_required", "resources: {mig: [{pattern: '1g.10gb'}]}",
     "resources.mig[0]: resources must have a 'name' field set"),
    ("devices_bad_string", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: some}]}}",
     "devices set as 'some' but the only valid string input is 'all'"),
    ("devices_zero_count", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: 0}]}}",
     "a count of devices must be > 0"),
    ("devices_float", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: 2.0}]}}",
     "unrecognized type for devices spec: 2.0"),
    ("devices_negative_index", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: ['-1']}]}}",
     "unsupported type for device in devices list: '-1'"),
    ("devices_bare_gpu_uuid_word", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [GPU-X]}]}}",
     "unsupported type for device in devices list: 'GPU-X'"),
    ("unknown_version", "version: v2", "version: unknown version: v2"),
    ("unknown_top_level_key", "flag: {migStrategy: mixed}", "flag: unknown key"),
    ("unknown_flag_key", "flags: {plugin: {passDeviceSpec: true}}", "flags.plugin.passDeviceSpec: unknown key"),
    ("wrong_type", "flags: {failOnInitError: maybe}", "flags.failOnInitError: Input should be a valid boolean"),
    ("replicas_as_string", "sharing: {timeSlicing: {resources: [{name: gpu, replicas: '4'}]}}",
     "sharing.timeSlicing.resources[0].replicas: Input should be a valid integer"),
    ("bad_duration", "flags: {gfd: {sleepInterval: soon}}", 'time: invalid duration "soon"'),
    ("not_yaml", "flags: [", "not valid YAML/JSON"),
    ("not_a_mapping", "- a\n- b\n", "top level must be a mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), [r[1:] for r in FILE_ERRORS], ids=[r[0] for r in FILE_ERRORS])
def test_bad_config_files_are_errors_naming_the_key_and_rule(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        with_file(tmp_path, text)
    assert message in str(info.value)
    assert str(tmp_path / "config.yaml") in str(info.value)


def test_every_error_is_reported_not_only_the_first(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        with_file(tmp_path, "flags: {migStrategi: mixed, plugin: {deviceIDStrategi: index}}")
    assert "flags.migStrategi: unknown key" in str(info.value)
    assert "flags.plugin.deviceIDStrategi: unknown key" in str(info.value)


def test_missing_config_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"error opening config file .*nope\.yaml"):
        load(["--config-file", str(tmp_path / "nope.yaml")])


def test_json_config_files_are_accepted(tmp_path: Path) -> None:
    cfg = with_file(tmp_path, json.dumps({"version": "v1", "flags": {"migStrategy": "mixed"}}))
    assert cfg.flags.mig_strategy == "mixed"


def test_empty_config_file_is_all_defaults(tmp_path: Path) -> None:
    assert with_file(tmp_path, "").to_dict() == load().to_dict()


def test_yaml_mig_index_is_not_read_as_a_base_60_number(tmp_path: Path) -> None:
    text = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [1:0, 0]}]}}"
    assert with_file(tmp_path, text).replicated.resources[0].devices == ("1:0", "0")


# --- flag validation (section a) ------------------------------------------------------------

FLAG_ERRORS = [
    ("unknown_list_strategy", ["--device-list-strategy", "envvar,bogus"], {},
     "unable to validate flags: invalid --device-list-strategy option: invalid strategy: bogus"),
    ("unknown_id_strategy", ["--device-id-strategy", "serial"], {},
     "unable to validate flags: invalid --device-id-strategy option: serial"),
    ("unknown_mig_strategy", ["--mig-strategy", "some"], {}, "unable to validate flags: unknown MIG strategy: some"),
    ("unknown_discovery", [], {"DEVICE_DISCOVERY_STRATEGY": "wsl"},
     "unable to validate flags: invalid --device-discovery-strategy option wsl"),
    ("imex_only_zero", ["--imex-channel-ids", "1"], {},
     "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found [1]"),
    ("shared_policy", ["--shared-devices-allocation-policy", "spread"], {},
     "invalid --shared-devices-allocation-policy option: spread"),
    ("allocation_policy", ["--allocation-policy", "random"], {}, "invalid --allocation-policy option: random"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "env", "message"), [r[1:] for r in FLAG_ERRORS], ids=[r[0] for r in FLAG_ERRORS])
def test_flag_validation_texts(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(argv, env)
    assert message in str(info.value)


MPS_RULES = [
    ("mps_with_mixed_mig", ["--mig-strategy", "mixed", "--mps-root", "/m"],
     "using --mig-strategy=mixed is not supported with MPS"),
    ("mps_needs_root", [], "using MPS requires --mps-root to be specified"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), [r[1:] for r in MPS_RULES], ids=[r[0] for r in MPS_RULES])
def test_mps_flag_rules(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        with_file(tmp_path, "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", argv)


# --- names, patterns, selections, durations --------------------------------------------------

NAMES = [("gpu", "nvidia.com/gpu"), ("nvidia.com/gpu", "nvidia.com/gpu"), ("mig-1g.10gb", "nvidia.com/mig-1g.10gb"),
         ("gpu.shared", "nvidia.com/gpu.shared")]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), NAMES, ids=["bare", "prefixed", "mig", "shared"])
def test_resource_names_get_the_nvidia_prefix(raw: str, expected: str) -> None:
    assert naming.resource_name(raw) == expected


PATTERNS = [
    ("1g.24gb", "1g.24gb", True),
    ("1g.24gb", "1g.24gb-me", False),
    ("1g.24gb", "1g.24gb+me.all", False),
    ("1g.24gb", "1g.24gb+gfx", False),
    ("1g.24gb", "x1g.24gb", False),
    ("1g.*", "1g.24gb", True),
    ("1g.*", "2g.48gb", False),
    ("*gb", "1g.24gb", True),
    ("*gb", "1g.24gb-me", False),
    ("*", "anything at all", True),
    ("*A100*", "NVIDIA A100-SXM4-80GB", True),
    ("A100", "NVIDIA A100-SXM4-80GB", False),
]


@pytest.mark.parametrize(
    ("pattern", "value", "matches"), PATTERNS, ids=[f"{p}~{v}={m}".replace(" ", "_") for p, v, m in PATTERNS]
)
def test_patterns_are_anchored_globs_with_star_only(pattern: str, value: str, matches: bool) -> None:
    assert v1.pattern_matches(pattern, value) is matches


REFS = [
    ("0", True),
    ("12", True),
    ("0:0", True),
    ("GPU-b1028956-cfa2-0990-bf4a-5da9abb51763", True),
    ("MIG-b1028956-cfa2-0990-bf4a-5da9abb51763", True),
    ("MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3/0", True),
    ("-1", False),
    ("GPU-UUID", False),
    ("MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763", False),
    ("0:", False),
]


@pytest.mark.parametrize(("ref", "ok"), REFS, ids=[r for r, _ in REFS])
def test_device_refs_accepted_as_nvidia_accepts_them(ref: str, ok: bool) -> None:
    assert v1.is_device_ref(ref) is ok


def test_bare_number_duration_in_a_file_is_nanoseconds(tmp_path: Path) -> None:
    assert with_file(tmp_path, "flags: {gfd: {sleepInterval: 60000000000}}").flags.gfd.sleep_interval_s == 60.0


def test_bare_number_on_the_command_line_needs_a_unit() -> None:
    parser = argparse.ArgumentParser()
    effective.add_gfd_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--sleep-interval", "60"])


@pytest.mark.parametrize(
    ("policy", "shared", "expected"),
    [
        (None, False, "topology"),
        (None, True, "distributed"),
        ("best-effort", False, "best-effort"),
        ("best-effort", True, "distributed"),
        ("packed", True, "packed"),
        ("packed", False, "topology"),
        ("topology", False, "topology"),
    ],
    ids=[
        "default_gpus",
        "default_replicas",
        "explicit_gpus",
        "gpu_policy_on_replicas_keeps_the_shared_policy",
        "packed_replicas",
        "shared_policy_on_whole_gpus_keeps_topology",
        "explicit_topology",
    ],
)
def test_allocation_policy_per_resource_kind(policy: str | None, shared: bool, expected: str) -> None:
    argv = ["--allocation-policy", policy] if policy else []
    assert load(argv).flags.plugin.policy_for(shared) == expected


# --- effective config round trip ------------------------------------------------------------

names = st.sampled_from(["gpu", "nvidia.com/gpu", "mig-1g.10gb", "a100"])
replica_entries = st.fixed_dictionaries(
    {"name": names, "replicas": st.integers(2, 48)},
    optional={
        "rename": st.sampled_from(["shared-gpu", "nvidia.com/gpu.shared"]),
        "devices": st.one_of(
            st.just("all"),
            st.integers(1, 8),
            st.lists(st.sampled_from(["0", "1", "1:0", 3]), min_size=1, max_size=3),
        ),
    },
)
blocks = st.fixed_dictionaries(
    {"resources": st.lists(replica_entries, min_size=1, max_size=3)},
    optional={"renameByDefault": st.booleans(), "failRequestsGreaterThanOne": st.booleans()},
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "flags": st.fixed_dictionaries(
            {},
            optional={
                "migStrategy": st.sampled_from(["none", "single", "mixed"]),
                "failOnInitError": st.booleans(),
                "nvidiaDriverRoot": st.sampled_from(["/", "/run/nvidia/driver"]),
                "plugin": st.fixed_dictionaries(
                    {},
                    optional={
                        "deviceListStrategy": st.one_of(
                            st.sampled_from(flags.DEVICE_LIST_STRATEGIES),
                            st.lists(st.sampled_from(flags.DEVICE_LIST_STRATEGIES), min_size=1, max_size=3),
                        ),
                        "deviceIDStrategy": st.sampled_from(["uuid", "index"]),
                        "passDeviceSpecs": st.booleans(),
                    },
                ),
                "gfd": st.fixed_dictionaries({}, optional={"sleepInterval": st.sampled_from(["60s", "infinite", 5])}),
            },
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "gpus": st.lists(st.fixed_dictionaries({"pattern": st.sampled_from(["*", "*A100*"]), "name": names})),
                "mig": st.lists(st.fixed_dictionaries({"pattern": st.sampled_from(["1g.*", "*"]), "name": names})),
            },
        ),
        "sharing": st.fixed_dictionaries({}, optional={"timeSlicing": blocks}),
        "imex": st.fixed_dictionaries({}, optional={"channelIDs": st.sampled_from([[], [0]])}),
    },
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_a_parsed_config_file_round_trips_through_its_dump(document: dict[str, Any]) -> None:
    parsed = v1.parse_text(yaml.safe_dump(document))
    again = v1.parse_data(parsed.to_dict())
    assert again == parsed


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_the_effective_config_json_is_a_config_file_that_reproduces_it(document: dict[str, Any]) -> None:
    first = effective.resolve(effective.PLUGIN_FLAGS, argparse.Namespace(), {}, v1.parse_data(document))
    second = effective.resolve(
        effective.PLUGIN_FLAGS, argparse.Namespace(), {}, v1.parse_text(first.to_json(), "<effective>")
    )
    assert second == first


# --- the print-config entry ----------------------------------------------------------------


def test_print_config_prints_the_effective_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("flags: {migStrategy: mixed}\n")
    assert command.main(["--print-config", "--config-file", str(path), "--device-id-strategy", "index"], {}) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["flags"]["migStrategy"] == "mixed"
    assert printed["flags"]["plugin"]["deviceIDStrategy"] == "index"


@pytest.mark.parametrize(
    ("text", "key", "rule"),
    [
        ("sharing: {timeSlicing: {resources: [{name: gpu, replica: 4}]}}", "resources[0].replica", "unknown key"),
        (
            "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}",
            "resources[0].replicas",
            "number of replicas must be >= 2",
        ),
    ],
    ids=["typo_key", "one_replica"],
)
def test_print_config_exits_2_naming_the_key_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str, rule: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert command.main(["--print-config", "--config-file", str(path)], {}) == 2
    err = capsys.readouterr().err
    assert key in err and rule in err
    assert len(err.strip().splitlines()) == 1


def test_print_config_rejects_a_bad_flag_value_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        command.main(["--print-config", "--pass-device-specs=maybe"], {})
    assert info.value.code == 2
    assert 'could not parse "maybe" as bool value' in capsys.readouterr().err


def test_gfd_flags_use_their_own_env_names() -> None:
    parser = argparse.ArgumentParser()
    effective.add_gfd_arguments(parser)
    env = {"GFD_ONESHOT": "true", "GFD_SLEEP_INTERVAL": "infinite", "NODE_NAME": "n1"}
    cfg = effective.load_gfd(parser.parse_args([]), env)
    assert cfg.flags.gfd.oneshot is True
    assert cfg.flags.gfd.sleep_interval == "infinite"
    env = {"GFD_MIG_STRATEGY": "mixed", "MIG_STRATEGY": "single", "USE_NODE_FEATURE_API": "false"}
    cfg = effective.load_gfd(parser.parse_args(["-o", "-"]), env)
    assert cfg.flags.gfd.output_file == "-"
    assert cfg.flags.mig_strategy == "mixed"


QUIET = [
    ("bare_seconds_flag", ["--health-recovery-quiet-period", "300"], {}, None, 300.0),
    ("go_duration_flag", ["--health-recovery-quiet-period", "1m30s"], {}, None, 90.0),
    ("fractional_seconds_env", [], {"HEALTH_RECOVERY_QUIET_PERIOD": "2.5"}, None, 2.5),
    ("zero_means_recovery_only", ["--health-recovery-quiet-period", "0"], {}, None, 0.0),
    ("file_number_is_seconds", [], {}, "flags: {plugin: {healthRecoveryQuietPeriod: 60}}", 60.0),
    ("default_off_as_nvidia", [], {}, None, 0.0),
]


@pytest.mark.parametrize(("argv", "env", "text", "seconds"), [q[1:] for q in QUIET], ids=[q[0] for q in QUIET])
def test_quiet_period_takes_seconds_or_a_go_duration(
    tmp_path: Path, argv: list[str], env: dict[str, str], text: str | None, seconds: float
) -> None:
    cfg = with_file(tmp_path, text or "", argv, env)
    assert cfg.flags.plugin.quiet_period_s == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [("infinite", "'infinite' is not allowed here"), ("-5s", "is negative"), ("soon", 'invalid duration "soon"')],
    ids=["infinite", "negative", "garbage"],
)
def test_bad_quiet_periods_are_refused(value: str, message: str) -> None:
    with pytest.raises((ConfigError, SystemExit)) as info:
        load([], {"HEALTH_RECOVERY_QUIET_PERIOD": value})
    assert message in str(info.value)


def test_registration_retry_interval_is_a_command_line_option() -> None:
    assert load().options.retry_interval_s == 30.0
    assert load(["--registration-retry-interval", "2.5"]).options.retry_interval_s == 2.5
    assert load([]).options.mps_check_interval_s == 5.0
    assert load([]).options.mps_container_root == "/mps"
    assert load([], {"REGISTRATION_RETRY_INTERVAL": "1m"}).options.retry_interval_s == 60.0


@pytest.mark.parametrize(
    ("argv", "env", "text", "expected"),
    [
        ([], {}, None, "all"),
        (["--health-recovery-xids", "94,95,ecc"], {}, None, "94,95,ecc"),
        ([], {"HEALTH_RECOVERY_XIDS": "wait"}, None, "wait"),
        ([], {}, "flags: {plugin: {healthRecoveryXids: '31,94'}}", "31,94"),
    ],
    ids=["default", "flag", "env", "file"],
)
def test_recovery_classes_come_from_flag_env_or_file(
    tmp_path: Path, argv: list[str], env: dict[str, str], text: str | None, expected: str
) -> None:
    assert with_file(tmp_path, text or "", argv, env).flags.plugin.health_recovery_xids == expected


def test_bad_recovery_classes_are_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="invalid --health-recovery-xids option: 'lots' is not an XID number"):
        load(["--health-recovery-xids", "79,lots"])


def test_a_binary_config_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x80")
    with pytest.raises(ConfigError, match=f"{path}: not a config file"):
        load(["--config-file", str(path)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--registration-retry-interval", "0"], "invalid --registration-retry-interval option: 0s"),
        (["--registration-retry-interval", "2h"], "must be within (0, 3600] seconds"),
        (["--mps-check-interval", "0"], "invalid --mps-check-interval option: 0s (must be within (0, 3600] seconds)"),
    ],
    ids=["zero", "too-long", "mps-check-zero"],
)
def test_out_of_range_retry_intervals_are_refused_with_the_range(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(argv)


def test_replicas_beyond_the_limit_are_refused_with_the_range(tmp_path: Path) -> None:
    text = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 100000}]}}"
    with pytest.raises(ConfigError, match=re.escape("number of replicas must be within [2, 1024], got 100000")):
        with_file(tmp_path, text)


def _help_with(formatter: type[argparse.HelpFormatter]) -> str:
    parser = argparse.ArgumentParser(prog="kubegpu plugin", formatter_class=formatter)
    effective.add_arguments(parser)
    return parser.format_help()


@pytest.mark.parametrize("columns", ["50", "200", "0", "wide", None], ids=["50", "200", "zero", "nan", "unset"])
def test_the_plugin_help_is_laid_out_at_the_width_argparse_would_choose(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _help_with(effective.HelpFormatter) == _help_with(argparse.HelpFormatter)


def test_the_plugin_help_follows_the_columns_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    narrow = _help_with(effective.HelpFormatter)
    monkeypatch.setenv("COLUMNS", "200")
    assert len(narrow.splitlines()) > len(_help_with(effective.HelpFormatter).splitlines())
