"""``kubegpu kubelet`` command line: exit codes and messages that need no running emulator."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.kubelet import command
from tests.polling import wait_until


def test_status_without_an_emulator_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["status", "--socket-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no kubegpu kubelet is running for socket dir {tmp_path}" in err


def test_admitting_a_file_that_is_not_a_pod_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "svc.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    with pytest.raises(SystemExit) as exc:
        command.main(["admit", str(bad), "--socket-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert f"{bad}: not a valid Pod: kind: must be Pod, got 'Service'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["delete", "a/b/c"],
        ["--grace-period", "-1"],
        ["--grace-period", "soon"],
        ["--grace-period", "nan"],
        ["--dial-timeout", "0"],
        ["--pre-start-timeout", "0"],
        ["--dial-timeout", "1e9"],
        ["--topology-manager-policy", "strict"],
        ["admit"],
        ["status", "--bogus"],
    ],
    ids=[
        "bad-target",
        "negative-grace",
        "non-numeric-grace",
        "nan-grace",
        "zero-dial-timeout",
        "zero-pre-start",
        "huge-dial-timeout",
        "unknown-policy",
        "admit-without-file",
        "unknown-flag",
    ],
)
def test_bad_arguments_exit_2(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main([*argv, "--socket-dir", str(tmp_path)])
    assert exc.value.code == 2


def test_help_names_the_client_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("admit POD.yaml", "delete NAMESPACE/NAME", "status [--json]", "--reproduce-reregistration-race"):
        assert word in out


def kubelet_process(socket_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubegpu", "kubelet", "--socket-dir", str(socket_dir), "--no-pod-resources"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_corrupt_pod_store_stops_the_start_naming_the_file(sock_dir: Path) -> None:
    store = sock_dir / ".kubegpu-kubelet" / "pods.json"
    store.parent.mkdir(parents=True)
    store.write_bytes(b'{"version": 1, "pods": [\xff')
    proc = kubelet_process(sock_dir)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines()[-1].startswith(f"kubegpu kubelet: pod store {store}: corrupt:")
    assert "Traceback" not in err
    assert not (sock_dir / "kubelet.sock").exists()


def test_sighup_is_logged_and_ignored_and_sigterm_still_removes_the_sockets(sock_dir: Path) -> None:
    proc = kubelet_process(sock_dir)
    try:
        wait_until(lambda: (sock_dir / "kubelet.sock").exists() or proc.poll() is not None, what="kubelet.sock")
        proc.send_signal(signal.SIGHUP)
        assert command.main(["status", "--socket-dir", str(sock_dir)]) == 0  # still serving
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert err.count('msg="SIGHUP ignored: nothing to reload"') == 1
    assert not (sock_dir / "kubelet.sock").exists()


def test_admitting_a_binary_file_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "pod.yaml"
    bad.write_bytes(b"\xff\xfe\x80")
    with pytest.raises(SystemExit) as exc:
        command.main(["admit", str(bad), "--socket-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert f"{bad}: not a Pod manifest (not UTF-8 text)" in capsys.readouterr().err
