"""The config switch: the destination link, atomically replaced, and the signal that reaches the real plugin.

The plugin runs as the console script ``nvidia-device-plugin`` (under a unique name, so that the test signals only
its own process on a shared machine) and reloads on the SIGHUP the config-manager sends when the label changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kubegpu.configmanager import command, switch
from tests.polling import wait_until

TIME_SLICING = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n"
)
BIN = Path(sys.executable).parent


def configs(root: Path) -> Path:
    """A directory laid out as Kubernetes mounts a ConfigMap: names linking into ..data."""
    data = root / "configmap" / "..2026_12_03_16_00_00.1"
    data.mkdir(parents=True)
    (data / "default").write_text("version: v1\n")
    (data / "time-sliced").write_text(TIME_SLICING)
    (root / "configmap" / "..data").symlink_to(data.name)
    for name in ("default", "time-sliced"):
        (root / "configmap" / name).symlink_to(f"..data/{name}")
    return root / "configmap"


def opts(root: Path, process: str, **changes: object) -> command.Options:
    base = command.options(
        [],
        {
            "NODE_NAME": "gpu-node-1",
            "CONFIG_FILE_SRCDIR": str(root / "configmap"),
            "CONFIG_FILE_DST": str(root / "config" / "config.yaml"),
            "PROCESS_TO_SIGNAL": process,
        },
    )
    return command.Options(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_the_kubernetes_configmap_layout_lists_only_the_config_names(tmp_path: Path) -> None:
    assert switch.available(configs(tmp_path)) == {"default", "time-sliced"}


def test_the_link_changes_only_when_the_target_does(tmp_path: Path) -> None:
    dst = tmp_path / "config" / "config.yaml"
    assert switch.link(dst, "/x/a") is True
    assert switch.link(dst, "/x/a") is False
    assert switch.link(dst, switch.EMPTY_TARGET) is True
    assert os.readlink(dst) == "/dev/null"
    assert [p.name for p in dst.parent.iterdir()] == ["config.yaml"]


async def _values(*values: str | None) -> AsyncIterator[str | None]:
    for value in values:
        yield value


async def test_oneshot_links_the_choice_and_exits_0_or_1_when_nothing_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs(tmp_path)
    o = opts(tmp_path, "none", oneshot=True)
    assert await command.run(o, _values("time-sliced")) == 0
    assert os.readlink(o.dst) == str(tmp_path / "configmap" / "time-sliced")
    assert await command.run(o, _values("h100")) == 1
    assert "nvidia.com/device-plugin.config=h100 names a config that does not exist" in capsys.readouterr().err


async def test_the_sidecar_keeps_the_current_config_when_the_label_names_none(tmp_path: Path) -> None:
    configs(tmp_path)
    o = opts(tmp_path, "none", send_signal=False)
    assert await command.run(o, _values(None, "missing")) == 0
    assert os.readlink(o.dst) == str(tmp_path / "configmap" / "default")


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, str]]:
    """The real plugin, started by its NVIDIA console-script name under a unique alias, reading the linked config."""
    configs(tmp_path)
    name = f"kg-{uuid.uuid4().hex[:8]}"
    alias = tmp_path / name
    alias.symlink_to(BIN / "nvidia-device-plugin")
    command.apply(opts(tmp_path, name, send_signal=False), None)
    log = tmp_path / "plugin.log"
    env = {
        **os.environ,
        "CONFIG_FILE": str(tmp_path / "config" / "config.yaml"),
        "KUBELET_SOCKET": "",
        "KUBEGPU_SOCKET_DIR": str(tmp_path / "s"),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen([str(alias), "--machine", "pcie-4xt4"], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc, log, name
    finally:
        proc.terminate()
        proc.wait(15)


def test_a_label_change_relinks_and_sighups_the_plugin_which_reloads(
    tmp_path: Path, plugin: tuple[subprocess.Popen[bytes], Path, str]
) -> None:
    proc, log, name = plugin
    wait_until(lambda: log.read_text().count("running with config") == 1, within=30, what="plugin started")
    assert switch.find(name) == [proc.pid]
    command.apply(opts(tmp_path, name), "time-sliced")
    wait_until(lambda: log.read_text().count("running with config") == 2, within=30, what="plugin reloaded")
    first, second = (line for line in log.read_text().splitlines() if "running with config" in line)
    assert "replicas" not in first and '\\"replicas\\": 4' in second
    command.apply(opts(tmp_path, name), "time-sliced")  # unchanged: no signal, no reload
    assert proc.poll() is None


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {"CONFIG_FILE_SRCDIR": "/a", "CONFIG_FILE_DST": "/b"}, "--node-name / NODE_NAME is required"),
        (
            ["--node-name", "n", "--config-file-srcdir", "/a", "--config-file-dst", "/b", "--signal", "HUP"],
            {},
            "--signal / SIGNAL: not a signal number: 'HUP'",
        ),
        (
            ["--node-name", "n", "--config-file-srcdir", "/a", "--config-file-dst", "/b"],
            {"FALLBACK_STRATEGIES": "named,any"},
            "--fallback-strategies / FALLBACK_STRATEGIES: invalid fallback strategy 'any' "
            "(choose from named, single, empty)",
        ),
        (
            ["--node-name", "n", "--config-file-srcdir", "/a", "--config-file-dst", "/b", "--oneshot=maybe"],
            {},
            "--oneshot / ONESHOT: invalid boolean 'maybe'",
        ),
        (
            [
                "--node-name",
                "n",
                "--config-file-srcdir",
                "/a",
                "--config-file-dst",
                "/b",
                "--kubeconfig",
                "/nonexistent/kc",
            ],
            {},
            "--kubeconfig /nonexistent/kc: no such file",
        ),
    ],
    ids=["node-name", "signal", "fallback", "bool", "kubeconfig"],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], env: dict[str, str], message: str) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}
    done = subprocess.run(
        [str(BIN / "config-manager"), *argv], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"kubegpu config-manager: error: {message}"]
