"""``kubegpu kubelet`` node-agent flags: bad input is one line naming the flag, exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.kubelet import command


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--node-labels", "pool"], "--node-labels: 'pool' must be key=value"),
        (["--register-with-taints", "gpu=yes"], "--register-with-taints: invalid taint spec 'gpu=yes'"),
        (["--node-status-update-frequency", "often"], "--node-status-update-frequency: invalid duration 'often'"),
        (["--node-name", "Bad_Name"], "--node-name: 'Bad_Name' is not a valid node name"),
        (["--capacity", "cpu=many"], "--capacity: cpu: 'many' is not a quantity"),
        (["--kube-reserved", "memory"], "--kube-reserved: 'memory' must be resource=quantity"),
        (["--node-lease-duration-seconds", "0"], "--node-lease-duration-seconds: must be positive, got 0"),
        (["--node-ip", "localhost"], "--node-ip: 'localhost' is not an IP address"),
    ],
    ids=["label", "taint", "duration", "node-name", "capacity", "reserved", "lease", "node-ip"],
)
def test_a_bad_agent_flag_exits_2_naming_it(
    argv: list[str], message: str, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main([*argv, "--kubeconfig", str(kubeconfig), "--socket-dir", str(tmp_path / "dp")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "dp").exists()


@pytest.mark.parametrize("argv", [["--node-name", "gpu-1"], ["--node-labels=a=b"], ["--max-pods", "10"]])
def test_an_agent_flag_without_kubeconfig_exits_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main([*argv, "--socket-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert f"{argv[0].split('=')[0]} needs --kubeconfig" in capsys.readouterr().err


@pytest.mark.parametrize("content", [None, "not: [a kubeconfig", "apiVersion: v1\nkind: Config\n"])
def test_an_unusable_kubeconfig_is_one_line_naming_the_file_and_exit_2(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kc.yaml"
    if content is not None:
        path.write_text(content)
    code = command.main(["--kubeconfig", str(path), "--node-name", "gpu-1", "--socket-dir", str(tmp_path / "dp")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert str(path) in err
    assert "Traceback" not in err
    assert not (tmp_path / "dp").exists()
