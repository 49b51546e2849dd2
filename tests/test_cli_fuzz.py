"""Every command line entry point under random arguments and random file contents: exit 0, 1 or 2, never a traceback.

The words come from each command's own ``--help`` (flags and sub-commands), the values from a mix of
edge-case text and paths to files with random bytes, directories, ``/proc`` entries and missing paths.
A command given valid input would go on to serve or simulate; the calls that start that (``asyncio.run``,
``time.sleep`` loops, the simulator's run pool, the demo's node start) stop the example there instead,
since reaching them means the input was accepted. Writes outside this test's directory and /tmp fail with
EACCES, as on a read-only host, so nothing lands in /etc, /var/run or /var/lib and the commands' handling
of unwritable paths is fuzzed too.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubegpu import cli


class Ran(Exception):
    """The command accepted its input and was about to run for real."""


SANDBOX = Path(tempfile.mkdtemp(prefix="kubegpu-fuzz-"))
_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
_CHOICES = re.compile(r"\{([a-z][\w-]*(?:,[a-z][\w-]*)+)\}")
_INDENTED = re.compile(r"^ {2,6}([a-z][a-z0-9-]+)\b", re.M)


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        cli.main(argv)
    return out.getvalue()


def _vocabulary(command: str) -> tuple[list[str], list[str]]:
    """Sub-commands (``{a,b}`` choices, and indented words whose own ``--help`` works) and flags of a command."""
    text = _help([command, "--help"])
    words = {w for group in _CHOICES.findall(text) for w in group.split(",")} | set(_INDENTED.findall(text))
    words |= set(re.findall(rf"kubegpu {command} ([a-z][a-z0-9-]+)", text))
    subs = []
    for word in sorted(words):
        sub_help = _help([command, word, "--help"])
        if sub_help.startswith(f"usage: kubegpu {command} {word}") or re.search(rf"^\s+{word} ", text, re.M):
            subs.append(word)
            text += sub_help
    subs += sorted({w for group in _CHOICES.findall(text) for w in group.split(",")} - set(subs))  # choice values
    flags = sorted(set(_FLAG.findall(text)) - {"-h", "--help", "--version"})
    return subs, flags


VOCABULARY = {command: _vocabulary(command) for command in cli.COMMANDS}


@pytest.fixture(scope="module", autouse=True)
def _remove_sandbox() -> Iterator[None]:
    yield
    shutil.rmtree(SANDBOX, ignore_errors=True)


TEXT_VALUES = ["0", "-1", "1", "3", "99999999999999999999", "nan", "inf", "-inf", "", " ", "x", "a,b", ":9400",
               "1.5", "true", "none", "dgx-a100", "a100-mig", "pcie-4xt4", "../../etc/passwd", "\x00", "é", "-",
               "/proc/self/status", "/proc/kubegpu", "/", str(SANDBOX), "/nonexistent/x"]  # fmt: skip


NEAR_VALID = [b"version: v1\n", b"{}", b"[]", b"\xff\xfe\x00", b"a,b,c\n1,2\n",
              b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"]  # fmt: skip


@st.composite
def file_value(draw: st.DrawFn) -> str:
    """A path to a fresh file in the sandbox with random or near-valid contents."""
    content = draw(
        st.one_of(
            st.binary(max_size=200),
            st.text(max_size=200).map(str.encode),
            st.sampled_from(NEAR_VALID),
        )
    )
    fd, name = tempfile.mkstemp(dir=SANDBOX, suffix=draw(st.sampled_from([".yaml", ".json", ".csv", ""])))
    os.write(fd, content)
    os.close(fd)
    return name


@st.composite
def argv_for(draw: st.DrawFn, command: str) -> list[str]:
    subs, flags = VOCABULARY[command]
    argv = [command]
    if subs and draw(st.booleans()):
        argv.append(draw(st.sampled_from(subs)))
    value = st.one_of(st.sampled_from(TEXT_VALUES), file_value(), st.text(max_size=12))
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(flags)) if flags and draw(st.integers(0, 4)) else None
        if flag is not None and flag.startswith("--") and draw(st.integers(0, 3)) == 0:
            argv.append(f"{flag}={draw(value)}")  # the --flag=value spelling
            continue
        if flag is not None:
            argv.append(flag)
        if draw(st.booleans()):
            argv.append(draw(value))
    return argv


#: Where writes may land: this test's directory and /tmp (temp dirs); everything else is "read-only".
WRITABLE = (SANDBOX, Path("/tmp").resolve())


def _inside(path: Any) -> bool:
    try:
        resolved = Path(os.fsdecode(path)).absolute().resolve()
    except (OSError, ValueError):
        return False
    return any(resolved == root or root in resolved.parents for root in WRITABLE)


def _paths(args: tuple[Any, ...]) -> list[Any]:
    return [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]


def _guard(real: Callable[..., Any], writes: Callable[..., bool]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if writes(*args, **kwargs) and not all(_inside(a) for a in _paths(args)):
            raise PermissionError(13, "Permission denied (fuzz sandbox: read-only outside /tmp)", args[0])
        return real(*args, **kwargs)

    return guarded


def _open_writes(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> bool:
    return any(c in mode for c in "wax+")


def _os_open_writes(path: Any, flags: int, *args: Any, **kwargs: Any) -> bool:
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))


def _always(*args: Any, **kwargs: Any) -> bool:
    return True


def command_module(name: str) -> Any:
    """The module holding a command's ``main`` (``cli.COMMANDS`` names it as ``module`` or ``module:function``)."""
    return importlib.import_module(cli.COMMANDS[name][0].split(":")[0])


@contextlib.contextmanager
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def ran(*args: Any, **kwargs: Any) -> None:
        for arg in args:
            close = getattr(arg, "close", None)  # a coroutine that will never be awaited
            if callable(close) and hasattr(arg, "cr_frame"):
                close()
        raise Ran

    import asyncio
    import time

    monkeypatch.setattr(asyncio, "run", ran)
    monkeypatch.setattr(time, "sleep", ran)
    monkeypatch.setattr(command_module("simulate"), "_execute", ran)  # the simulator's run pool
    monkeypatch.setattr(command_module("demo"), "LocalNode", ran)  # would start kubelet, plugin and exporter
    monkeypatch.setattr(builtins, "open", _guard(builtins.open, _open_writes))
    monkeypatch.setattr(io, "open", _guard(io.open, _open_writes))
    monkeypatch.setattr(os, "open", _guard(os.open, _os_open_writes))
    for name in ("mkdir", "replace", "rename", "unlink", "remove", "rmdir", "symlink", "link", "chmod", "mkfifo"):
        monkeypatch.setattr(os, name, _guard(getattr(os, name), _always))
    monkeypatch.chdir(SANDBOX)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(SANDBOX))
    monkeypatch.setenv("TMPDIR", str(SANDBOX))
    monkeypatch.setattr(tempfile, "tempdir", str(SANDBOX))
    yield


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
@settings(
    max_examples=int(os.environ.get("KUBEGPU_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_command_line_exits_0_1_or_2_and_never_raises(
    command: str, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = data.draw(argv_for(command), label="argv")
    with monkeypatch.context() as patch, sandboxed(patch):
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code: object = cli.main(argv)
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code
        except Ran:
            return
    assert code in (0, 1, 2), (argv, code, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
