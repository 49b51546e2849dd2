"""The entry point: help, unknown commands, global logging options and the log line formats."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from kubegpu import cli


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert f"  {name} " in out


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["teleport"]) == 2
    assert "unknown command 'teleport'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-format", "xml", "machines", "list"], "--log-format must be text or json"),
        (["machines", "list", "--log-level=loud"], "--log-level must be"),
    ],
    ids=["bad-format", "bad-level"],
)
def test_bad_global_options_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_global_options_are_taken_anywhere_on_the_line() -> None:
    options, rest = cli._split_global(["fault", "--log-format=json", "list", "--log-level", "debug"])
    assert options == {"--log-format": "json", "--log-level": "debug"}
    assert rest == ["fault", "list"]


def _record(**fields: object) -> logging.LogRecord:
    record = logging.LogRecord("kubegpu.x", logging.INFO, __file__, 1, "registered %s", ("now",), None)
    for key, value in fields.items():
        setattr(record, key, value)
    return record


def test_key_value_lines_quote_what_needs_quoting() -> None:
    line = cli.KeyValueFormatter().format(_record(resource="nvidia.com/gpu", devices=8, note="two words"))
    assert " level=info logger=kubegpu.x " in line
    assert 'msg="registered now"' in line
    assert line.endswith('resource=nvidia.com/gpu devices=8 note="two words"')


def test_json_lines_carry_the_fields() -> None:
    data = json.loads(cli.JsonFormatter().format(_record(resource="nvidia.com/gpu", devices=8)))
    assert data["msg"] == "registered now" and data["resource"] == "nvidia.com/gpu" and data["devices"] == 8


def test_the_console_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kubegpu", "machines", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert "dgx-a100" in out and "a100-mig" in out


def test_no_command_prints_the_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("usage: kubegpu ") and captured.out == ""


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_command_prints_its_version(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kubegpu import __version__

    assert cli.main([command, "--version"]) == 0
    assert capsys.readouterr().out == f"kubegpu {command} {__version__}\n"


@pytest.mark.parametrize("reader", ["head -1", "true"], ids=["head", "closed-at-once"])
def test_a_closed_stdout_pipe_is_not_a_traceback(reader: str) -> None:
    # ``true`` exits before kubegpu has started, so its first write meets a closed pipe every time.
    done = subprocess.run(
        f"{sys.executable} -m kubegpu machines list | {reader}; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "argv",
    [["simulate", "--seed", "-1"], ["fault", "xid", "--gpu", "99", "--xid", "79"], ["kubelet", "--dial-timeout", "0"],
     ["machines", "show", "nope"], ["topology", "--bogus"]],
    ids=["simulate", "fault", "kubelet", "machines", "topology"],
)  # fmt: skip
def test_bad_input_is_one_line_without_the_usage_block(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "kubegpu", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"kubegpu {argv[0]}") and "usage:" not in done.stderr


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_command_is_a_command_module_with_an_entry_point(name: str) -> None:
    import importlib

    target = cli.COMMANDS[name][0]
    module_name, _, function = target.partition(":")
    assert module_name.endswith(".command"), f"kubegpu {name}: {module_name} is not named command.py"
    assert callable(getattr(importlib.import_module(module_name), function or "main"))
