"""dcgm-exporter's command line: the flag table, CLI > env > default, urfave/cli's value syntax, device specs."""

from __future__ import annotations

import re

import pytest

from kubegpu.monitoring import options
from tests.shared import REPO

# Spot checks of the table against dcgm-exporter's pkg/cmd/app.go (name, aliases, env, default).
UPSTREAM = [
    ("collectors", ("f",), ("DCGM_EXPORTER_COLLECTORS",), "/etc/dcgm-exporter/default-counters.csv"),
    ("address", ("a",), ("DCGM_EXPORTER_LISTEN",), ":9400"),
    ("collect-interval", ("c",), ("DCGM_EXPORTER_INTERVAL",), "30000"),
    ("kubernetes", ("k",), ("DCGM_EXPORTER_KUBERNETES",), "false"),
    ("use-old-namespace", ("o",), ("DCGM_EXPORTER_USE_OLD_NAMESPACE",), "false"),
    ("cpu-devices", ("p",), ("DCGM_EXPORTER_CPU_DEVICES_STR",), "f"),
    ("configmap-data", ("m",), ("DCGM_EXPORTER_CONFIGMAP_DATA",), "none"),
    ("remote-hostengine-info", ("r",), ("DCGM_REMOTE_HOSTENGINE_INFO",), "localhost:5555"),
    ("devices", ("d",), ("DCGM_EXPORTER_DEVICES_STR",), "f"),
    ("no-hostname", ("n",), ("DCGM_EXPORTER_NO_HOSTNAME",), "false"),
    ("switch-devices", ("s",), ("DCGM_EXPORTER_OTHER_DEVICES_STR",), "f"),
    ("xid-count-window-size", ("x",), ("DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",), "300000"),
    ("replace-blanks-in-model-name", ("rbmn",), ("DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME",), "false"),
    ("web-config-file", (), ("DCGM_EXPORTER_WEB_CONFIG_FILE",), ""),
    ("web-read-timeout", (), ("DCGM_EXPORTER_WEB_READ_TIMEOUT",), "10s"),
    ("web-write-timeout", (), ("DCGM_EXPORTER_WEB_WRITE_TIMEOUT",), "30s"),
    ("kubernetes-gpu-id-type", (), ("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",), "uid"),
    ("pod-resources-kubelet-socket", (), ("DCGM_POD_RESOURCES_KUBELET_SOCKET",),
     "/var/lib/kubelet/pod-resources/kubelet.sock"),
    ("nvidia-resource-names", (), ("NVIDIA_RESOURCE_NAMES",), ""),
    ("kubernetes-virtual-gpus", (), ("KUBERNETES_VIRTUAL_GPUS",), "false"),
    ("log-format", (), ("DCGM_EXPORTER_LOG_FORMAT",), "text"),
    ("debug", (), ("DCGM_EXPORTER_DEBUG",), "false"),
    ("dcgm-log-level", (), ("DCGM_EXPORTER_DCGM_LOG_LEVEL",), "NONE"),
    ("web-systemd-socket", (), ("DCGM_EXPORTER_SYSTEMD_SOCKET",), "false"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "aliases", "env", "default"), UPSTREAM, ids=[u[0] for u in UPSTREAM])
def test_each_flag_has_dcgm_exporters_short_form_env_and_default(
    name: str, aliases: tuple[str, ...], env: tuple[str, ...], default: str
) -> None:
    flag = options.BY_NAME[name]
    assert (flag.aliases, flag.env, flag.default) == (aliases, env, default)


def test_names_aliases_and_env_vars_are_unique() -> None:
    names = [n for f in options.FLAGS for n in (f.name, *f.aliases)]
    envs = [e for f in options.FLAGS for e in f.env]
    assert len(names) == len(set(names)) and len(envs) == len(set(envs))


def test_readme_table_lists_every_flag_with_its_env_and_what_we_do() -> None:
    readme = (REPO / "README.md").read_text()
    readme = readme[readme.index("<!-- section:monitoring -->") : readme.index("<!-- /section:monitoring -->")]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `--([a-z0-9-]+)`.*$", readme, re.M)}
    for flag in options.FLAGS:
        assert flag.name in rows, flag.name
        row = rows[flag.name]
        assert all(f"`{e}`" in row for e in flag.env), flag.name
        assert ("no effect" in row) is (flag.effect == "ignored"), flag.name


@pytest.mark.parametrize(
    ("given", "environ", "expected", "source"),
    [
        (["5000"], {"DCGM_EXPORTER_INTERVAL": "1000"}, 5000, "--collect-interval"),
        (None, {"DCGM_EXPORTER_INTERVAL": "1000"}, 1000, "$DCGM_EXPORTER_INTERVAL"),
        (None, {}, 30000, "default"),
        (["1", "2"], {}, 2, "--collect-interval"),
    ],
    ids=["cli-beats-env", "env-beats-default", "default", "last-repeat-wins"],
)
def test_command_line_beats_environment_beats_default(
    given: list[str] | None, environ: dict[str, str], expected: int, source: str
) -> None:
    value = options.resolve(options.BY_NAME["collect-interval"], given, environ)
    assert (value.value, value.source, value.is_set) == (expected, source, source != "default")


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("1", True), ("T", True), ("FALSE", False),
                                                ("0", False), ("f", False)])  # fmt: skip
def test_booleans_are_read_as_go_reads_them(text: str, expected: bool) -> None:
    assert options.resolve(options.BY_NAME["kubernetes"], None, {"DCGM_EXPORTER_KUBERNETES": text}).value is expected


def test_a_bad_value_names_its_source() -> None:
    message = r'^\$DCGM_EXPORTER_NO_HOSTNAME: could not parse "yes please" as bool'
    with pytest.raises(options.OptionError, match=message):
        options.resolve(options.BY_NAME["no-hostname"], None, {"DCGM_EXPORTER_NO_HOSTNAME": "yes please"})


def test_lists_split_on_commas_across_repeats() -> None:
    flag = options.BY_NAME["nvidia-resource-names"]
    assert options.resolve(flag, ["a.com/x, b.com/y", "c.com/z"], {}).value == ("a.com/x", "b.com/y", "c.com/z")
    assert options.resolve(flag, None, {"NVIDIA_RESOURCE_NAMES": "a,,b"}).value == ("a", "b")


def test_go_style_single_dash_long_flags_are_rewritten_for_argparse() -> None:
    names = {"collectors", "address", "rbmn"}
    argv = ["-collectors", "x.csv", "-address=:9401", "-rbmn", "-f", "y", "-k", "--", "-address"]
    assert options.normalise_argv(argv, names) == [
        "--collectors", "x.csv", "--address=:9401", "--rbmn", "-f", "y", "-k", "--", "-address"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f", options.FLEX),
        ("g", options.DeviceSpec(flex=False, major=())),
        ("i", options.DeviceSpec(flex=False, minor=())),
        ("g:0,1", options.DeviceSpec(flex=False, major=(0, 1))),
        ("i:0,2-4", options.DeviceSpec(flex=False, minor=(0, 2, 3, 4))),
        ("g+i", options.DeviceSpec(flex=False, major=(), minor=())),
        ("g:1+i:3", options.DeviceSpec(flex=False, major=(1,), minor=(3,))),
    ],
)
def test_device_specs_parse_as_dcgm_exporter_documents_them(text: str, expected: options.DeviceSpec) -> None:
    assert options.parse_devices(text) == expected


@pytest.mark.parametrize("text", ["", "x", "f+g", "g+g", "g:", "g:a", "i:4-2", "g:-1", "G"])
def test_malformed_device_specs_are_errors(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        options.parse_devices(text)


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("1m30s", 90.0), ("250ms", 0.25), ("0", 0.0),
                                               ("1h", 3600.0), ("1.5s", 1.5)])  # fmt: skip
def test_go_durations(text: str, seconds: float) -> None:
    assert options.go_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "10x", "1..2s", "yes"])
def test_bad_go_durations_are_errors(text: str) -> None:
    with pytest.raises(ValueError):
        options.go_duration_s(text)
