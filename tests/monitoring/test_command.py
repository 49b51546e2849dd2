"""``kubegpu exporter`` as a user runs it: a real process, scraped over HTTP, checked by promtool."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kubegpu.gpu import profiles
from kubegpu.monitoring import command, counters
from tests.monitoring import exposition
from tests.monitoring.exporter_process import ExporterProcess, fault, get, scrape
from tests.monitoring.podresources_server import ListerServer, Pod
from tests.monitoring.reference import enabled_counters
from tests.polling import eventually, wait_until

DGX = profiles.load("dgx-a100")
T4 = profiles.load("pcie-4xt4")
GPU_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}

# promtool's linter objects to dcgm-exporter's own naming; these findings are the price of drop-in
# compatibility (README, Monitoring) and nothing else may appear.
_COMPAT_FINDINGS = (
    re.compile(r'^DCGM_\w+ counter metrics should have "_total" suffix$'),
    re.compile(r"^DCGM_\w+ metric name should not include type 'counter'$"),
    re.compile(r"^\w+ label names should be written in 'snake_case' not 'camelCase'$"),  # modelName
)


def promtool_check_metrics(text: str) -> list[str]:
    """Lint findings promtool reports beyond the documented dcgm-exporter naming ones."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package 'prometheus'; .ci/run installs it)")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    findings = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode in (0, 3), result.stderr  # 3 = lint findings only; 1 = could not parse
    return [f for f in findings if not any(p.match(f) for p in _COMPAT_FINDINGS)]


def test_every_enabled_default_counter_is_served_for_eight_gpus_and_promtool_accepts_it(tmp_path: Path) -> None:
    with ExporterProcess(["--machine", "dgx-a100", "--fault-file", str(tmp_path / "f.jsonl")]) as exporter:
        text = scrape(exporter.url)
    out = exposition.parse(text)
    for row in enabled_counters():
        if row["prom_type"] == "label":
            continue
        series = out.named(row["field"])
        assert sorted(s.labels["UUID"] for s in series) == sorted(g.uuid for g in DGX.gpus), row["field"]
        assert all(set(s.labels) == GPU_LABELS for s in series), row["field"]
        assert out.types[row["field"]] == row["prom_type"]
    assert promtool_check_metrics(text) == []


def test_a_malformed_page_would_fail_the_promtool_check() -> None:
    # The check above must be able to fail: promtool rejects what it cannot parse.
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package 'prometheus'; .ci/run installs it)")
    result = subprocess.run([promtool, "check", "metrics"], input='x{a="1" 2\n', capture_output=True, text=True)
    assert result.returncode not in (0, 3)


def test_an_injected_xid_reaches_xid_errors_on_the_next_collection(tmp_path: Path) -> None:
    journal = tmp_path / "f.jsonl"
    args = ["--machine", "dgx-a100", "--fault-file", str(journal), "--collect-interval", "200"]
    with ExporterProcess(args) as exporter:

        def xids() -> dict[str, float]:
            page = exposition.parse(scrape(exporter.url))
            return {s.labels["gpu"]: s.value for s in page.named("DCGM_FI_DEV_XID_ERRORS")}

        assert set(xids().values()) == {0.0}
        fault(journal, "xid", "--machine", "dgx-a100", "--gpu", "3", "--xid", "79")
        wait_until(lambda: xids()["3"] == 79, what="XID 79 on GPU 3")
        assert xids()["0"] == 0


def test_a_lost_gpu_disappears_and_is_reported_unavailable(tmp_path: Path) -> None:
    journal = tmp_path / "f.jsonl"
    args = ["--machine", "dgx-a100", "--fault-file", str(journal), "--collect-interval", "200"]
    with ExporterProcess(args) as exporter:
        fault(journal, "lost", "--machine", "dgx-a100", "--gpu", "6")

        def available() -> dict[str, float]:
            page = exposition.parse(scrape(exporter.url))
            return {s.labels["gpu"]: s.value for s in page.named("kubegpu_exporter_gpu_available")}

        wait_until(lambda: available()["6"] == 0, what="GPU 6 unavailable")
        page = exposition.parse(scrape(exporter.url))
        assert "6" not in {s.labels["gpu"] for s in page.named("DCGM_FI_DEV_GPU_TEMP")}


def test_a_counters_file_chooses_the_series_and_unknown_fields_are_logged(tmp_path: Path) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_GPU_TEMP, gauge, Temp.\nDCGM_FI_DEV_FAN_SPEED, gauge, Fan.\n")
    args = ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "-f", str(csv), "--no-hostname"]
    with ExporterProcess(args) as exporter:
        page = exposition.parse(scrape(exporter.url))
    assert {n for n in page.names() if n.startswith("DCGM_")} == {"DCGM_FI_DEV_GPU_TEMP"}
    assert page.helps["DCGM_FI_DEV_GPU_TEMP"] == "Temp."
    assert "Hostname" not in page.named("DCGM_FI_DEV_GPU_TEMP")[0].labels
    log = "".join(exporter.stderr_lines)
    assert 'msg="counter not available, skipped" field=DCGM_FI_DEV_FAN_SPEED' in log


def test_dcgm_exporter_environment_variables_configure_it(tmp_path: Path) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n")
    env = {"DCGM_EXPORTER_COLLECTORS": str(csv), "NODE_NAME": "gpu-node-7"}
    args = ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "--hostname-label", "hostname"]
    with ExporterProcess(args, env=env) as exporter:
        page = exposition.parse(scrape(exporter.url))
    assert {n for n in page.names() if n.startswith("DCGM_")} == {"DCGM_FI_DEV_POWER_USAGE"}
    assert page.named("DCGM_FI_DEV_POWER_USAGE")[0].labels["hostname"] == "gpu-node-7"


def test_health_and_sigterm(tmp_path: Path) -> None:
    exporter = ExporterProcess(["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl")]).start()
    try:
        assert get(exporter.url + "/health")[0] == 200
    finally:
        assert exporter.stop() == 0
    assert 'msg="exporter stopped"' in "".join(exporter.stderr_lines)


async def test_pod_resources_socket_turns_on_pod_labels(tmp_path: Path, sock_dir: Path) -> None:
    socket = sock_dir / "pod-resources.sock"
    args = ["--machine", "dgx-a100", "--fault-file", str(tmp_path / "f.jsonl"), "--collect-interval", "200"]
    async with ListerServer(socket) as lister:
        lister.pods = [Pod("ml", "train", {"main": [("nvidia.com/gpu", [f"{DGX.gpus[2].uuid}::0", "7"])]})]
        exporter = await asyncio.to_thread(ExporterProcess([*args, "--pod-resources-socket", str(socket)]).start)
        try:
            page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
        finally:
            await asyncio.to_thread(exporter.stop)
    held = {s.labels["gpu"]: s.labels for s in page.named("DCGM_FI_DEV_GPU_UTIL") if "pod" in s.labels}
    assert set(held) == {"2", "7"}
    assert {(x["namespace"], x["pod"], x["container"]) for x in held.values()} == {("ml", "train", "main")}
    assert page.named("kubegpu_exporter_pod_resources_up")[0].value == 1


def test_print_default_counters_prints_the_shipped_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--print-default-counters"]) == 0
    assert capsys.readouterr().out == counters.default_text()


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["-c", "fast"], {}, "--collect-interval: 'fast' is not a whole number"),
        (["-c", "0"], {}, "--collect-interval 0: must be a positive number"),
        ([], {"DCGM_EXPORTER_INTERVAL": "-5"}, "$DCGM_EXPORTER_INTERVAL -5: must be a positive number"),
        (["--listen", "9400"], {}, "listen address '9400' must look like HOST:PORT"),
        (["-a", ":99999"], {}, "port 99999 is out of range"),
        (["--machine", "dgx-z900"], {}, "unknown machine profile 'dgx-z900'"),
        (["-f", "/nonexistent/c.csv"], {}, "counters file /nonexistent/c.csv: cannot read"),
        (["-f", "/"], {}, "counters file /: cannot read"),
        (["-f", "/dev/zero"], {}, "counters file /dev/zero: larger than 1048576 bytes"),
        ([], {"DCGM_EXPORTER_KUBERNETES": "maybe"}, '$DCGM_EXPORTER_KUBERNETES: could not parse "maybe" as bool value'),
        (["--hostname-label", "HOSTNAME"], {}, "--hostname-label: invalid choice"),
        (["-d", "g:0,x"], {}, "--devices: 'g:0,x': 'x' is not an ID"),
        (["-d", "f+g"], {}, "f (flex) cannot be combined with g or i"),
        (["-d", "g:9"], {}, "--devices: GPU 9 does not exist on this machine"),
        (["-d", "i"], {}, "i (GPU instances) cannot be specified unless MIG mode is enabled"),
        ([], {"DCGM_EXPORTER_OTHER_DEVICES_STR": "z"}, "$DCGM_EXPORTER_OTHER_DEVICES_STR: 'z': expected f, g"),
        (["--kubernetes-gpu-id-type", "index"], {}, "--kubernetes-gpu-id-type: 'index': choose from uid, device-name"),
        (["--dcgm-log-level", "LOUD"], {}, "--dcgm-log-level: 'LOUD': choose from NONE"),
        (["--kubernetes-pod-label-allowlist-regex", "app,("], {}, "regex '('"),
        (["--web-config-file", "/nonexistent/web.yml"], {}, "--web-config-file /nonexistent/web.yml: cannot read"),
        (["--no-such-flag"], {}, "unrecognized arguments: --no-such-flag"),
        (["-m", "just-a-name"], {}, "--configmap-data 'just-a-name': expected NAMESPACE:NAME (or none)"),
        ([], {"DCGM_EXPORTER_CONFIGMAP_DATA": "ns:"}, "$DCGM_EXPORTER_CONFIGMAP_DATA 'ns:': expected NAMESPACE:NAME"),
        (["-m", "ns:cm", "--kubeconfig", "/nonexistent/kc"], {}, "--kubeconfig /nonexistent/kc: no such file"),
        (["-k", "--kubernetes-enable-pod-uid", "--kubeconfig", "/nonexistent/kc"], {}, "--kubeconfig /nonexistent/kc"),
        (
            ["--pod-resources-kubelet-socket", "/nonexistent/pod-resources/kubelet.sock"],
            {},
            "--pod-resources-kubelet-socket /nonexistent/pod-resources/kubelet.sock: directory "
            "/nonexistent/pod-resources does not exist (is the kubelet's pod-resources directory mounted?)",
        ),
    ],
    ids=[
        "interval-word",
        "interval-zero",
        "interval-env",
        "address-no-colon",
        "address-port",
        "machine",
        "counters-missing",
        "counters-directory",
        "counters-endless",
        "kubernetes-env",
        "hostname-label",
        "devices-syntax",
        "devices-flex-combined",
        "devices-missing-gpu",
        "devices-instances-without-mig",
        "switch-devices-env",
        "gpu-id-type",
        "dcgm-log-level",
        "allowlist-regex",
        "web-config-missing",
        "unknown-flag",
        "configmap-no-colon",
        "configmap-env-no-name",
        "configmap-kubeconfig-missing",
        "pod-uid-kubeconfig-missing",
        "pod-resources-directory-missing",
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    argv: list[str],
    env: dict[str, str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as info:
        command.main(["--machine", "pcie-4xt4", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "usage:" not in err  # one line, not argparse's usage block


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DCGM_FI_DEV_GPU_TEMP gauge temp\n", "c.csv:1: expected 3 comma-separated fields"),
        ("DCGM_FI_DEV_FAN_SPEED, gauge, fan\n", "c.csv: enables no field this exporter can serve"),
    ],
    ids=["bad-row", "nothing-usable"],
)
def test_a_bad_counters_file_exits_2_naming_file_and_line(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text(text)
    with pytest.raises(SystemExit) as info:
        command.main(["--machine", "pcie-4xt4", "-f", str(csv)])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_address_in_use_exits_1_with_one_line(tmp_path: Path) -> None:
    with ExporterProcess(["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl")]) as first:
        result = subprocess.run(
            [
                *first.args[:3],
                "exporter",
                "--machine",
                "pcie-4xt4",
                "--fault-file",
                str(tmp_path / "f.jsonl"),
                "--listen",
                f"127.0.0.1:{first.port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"kubegpu exporter: cannot listen on 127.0.0.1:{first.port}" in result.stderr


def test_without_a_machine_and_without_nvml_exits_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # No GPU driver here (nor in CI): the NVML backend cannot start, and that is a runtime failure.
    assert command.main(["--listen", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kubegpu exporter: ")


def test_a_dcgm_exporter_command_line_runs_unchanged_and_logs_what_has_no_effect_once(tmp_path: Path) -> None:
    csv = tmp_path / "dcp-metrics-included.csv"
    csv.write_text("DCGM_FI_DEV_GPU_TEMP, gauge, Temp.\nDCGM_EXP_XID_ERRORS_COUNT, gauge, XIDs.\n")
    argv = [
        "--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"),
        "-collectors", str(csv), "-no-hostname", "-rbmn", "-x", "60000", "--debug=false",
        "-remote-hostengine-info", "nv-hostengine:5555", "--configmap-data=gpu-operator:exporter-metrics",
        "--kubernetes-gpu-id-type", "device-name", "--web-read-timeout", "5s", "--use-old-namespace",
        "--enable-dcgm-log", "--dcgm-log-level", "ERROR", "--switch-devices", "g", "-p", "g:0",
    ]  # fmt: skip
    # No cluster here: the ConfigMap of -m cannot be read, and the -f file is used (logged).
    env = {"DCGM_EXPORTER_DUMP_ENABLED": "true", "DCGM_EXPORTER_INTERVAL": "1000", "KUBECONFIG": str(tmp_path / "no")}
    with ExporterProcess(argv, env=env) as exporter:
        page = exposition.parse(scrape(exporter.url))
        log = "".join(exporter.stderr_lines)
    temps = page.named("DCGM_FI_DEV_GPU_TEMP")
    assert len(temps) == 4
    assert all("Hostname" not in s.labels and " " not in s.labels["modelName"] and "uuid" in s.labels for s in temps)
    no_effect = re.findall(r'msg="flag has no effect here" flag=(\S+)', log)
    expected = ["--remote-hostengine-info", "--xid-count-window-size", "--enable-dcgm-log",
                "--dcgm-log-level", "--switch-devices", "--cpu-devices", "--dump-enabled"]  # fmt: skip
    assert sorted(no_effect) == sorted(expected)
    assert f'msg="falling back to the counters file" file={csv}' in log
    assert "from=$DCGM_EXPORTER_DUMP_ENABLED" in log


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("kubegpu exporter ")


def test_a_1x_compatibility_counters_file_loads(tmp_path: Path) -> None:
    csv = tmp_path / "1.x-compatibility-metrics.csv"
    csv.write_text(
        "# 1.x names\ndcgm_sm_clock, gauge, SM clock.\ndcgm_fb_used, gauge, FB used.\n"
        "dcgm_pcie_tx_throughput, counter, PCIe TX.\ndcgm_fi_prof_gr_engine_active, gauge, GR active.\n"
    )
    with ExporterProcess(["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f"), "-f", str(csv), "-o"]) as e:
        page = exposition.parse(scrape(e.url))
        log = "".join(e.stderr_lines)
    assert {n for n in page.names() if n.startswith("dcgm")} == {
        "dcgm_sm_clock", "dcgm_fb_used", "dcgm_fi_prof_gr_engine_active"
    }  # fmt: skip
    assert 'msg="counter not available, skipped" field=dcgm_pcie_tx_throughput' in log


async def test_device_name_ids_are_attributed_with_the_device_name_gpu_id_type(tmp_path: Path, sock_dir: Path) -> None:
    socket = sock_dir / "pod-resources.sock"
    args = ["--machine", "dgx-a100", "--fault-file", str(tmp_path / "f.jsonl"), "--pod-resources-socket", str(socket)]
    async with ListerServer(socket) as lister:
        lister.pods = [Pod("ml", "train", {"main": [("nvidia.com/gpu", ["nvidia4/vgpu0"])]})]
        env = {"DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE": "device-name"}
        exporter = await asyncio.to_thread(ExporterProcess(args, env=env).start)
        try:
            page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
        finally:
            await asyncio.to_thread(exporter.stop)
    held = [s.labels["gpu"] for s in page.named("DCGM_FI_DEV_GPU_TEMP") if "pod" in s.labels]
    assert held == [str(next(g.index for g in DGX.gpus if g.minor == 4))]


def test_web_systemd_socket_serves_the_socket_systemd_passed(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    # As systemd does: the socket on descriptor 3, LISTEN_FDS=1 and LISTEN_PID = the exporter's own pid. bash moves
    # the passed descriptor to 3, so the fork runs no Python (a preexec_fn in a process with gRPC threads can hang).
    exporter = [sys.executable, "-m", "kubegpu", "exporter", "--machine", "pcie-4xt4", "--fault-file",
                str(tmp_path / "f.jsonl"), "--web-systemd-socket", "--address", "127.0.0.1:1"]  # fmt: skip
    fd = listener.fileno()
    log_path = tmp_path / "exporter.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            ["bash", "-c", f'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&{fd} {fd}<&-', "bash", *exporter],
            pass_fds=(fd,),
            stderr=log,
        )
    try:
        try:
            page = wait_until(lambda: _try_scrape(f"http://127.0.0.1:{port}"), what="metrics on the passed socket")
        except AssertionError as missing:
            raise AssertionError(f"{missing}; the exporter logged: {log_path.read_text()!r}") from None
        assert "DCGM_FI_DEV_GPU_TEMP{" in page
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        listener.close()
    assert proc.returncode == 0, log_path.read_text()


def _try_scrape(url: str) -> str | None:
    try:
        return scrape(url)
    except OSError:
        return None


def test_web_systemd_socket_without_a_passed_socket_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        command.main(["--machine", "pcie-4xt4", "--web-systemd-socket"])
    assert info.value.code == 2
    assert "--web-systemd-socket: no socket passed by systemd" in capsys.readouterr().err


async def test_pod_labels_without_a_cluster_are_logged_once_and_the_series_keep_their_pod(
    tmp_path: Path, sock_dir: Path
) -> None:
    socket = sock_dir / "pod-resources.sock"
    args = ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "-c", "200"]
    args += ["--pod-resources-socket", str(socket), "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid"]
    env = {"KUBECONFIG": str(tmp_path / "none")}
    async with ListerServer(socket) as lister:
        lister.pods = [Pod("ml", "train", {"main": [("nvidia.com/gpu", [T4.gpus[0].uuid])]})]
        exporter = await asyncio.to_thread(ExporterProcess(args, env=env).start)
        try:
            page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
        finally:
            assert await asyncio.to_thread(exporter.stop) == 0
    held = [s.labels for s in page.named("DCGM_FI_DEV_GPU_TEMP") if "pod" in s.labels]
    assert len(held) == 1 and held[0]["pod"] == "train" and "pod_uid" not in held[0]
    log = "".join(exporter.stderr_lines)
    assert log.count('msg="no Kubernetes API configuration" for="pod labels and UIDs"') == 1


def test_pod_label_flags_without_kubernetes_are_logged_as_having_no_effect(tmp_path: Path) -> None:
    args = ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "--kubernetes-enable-pod-labels"]
    with ExporterProcess(args) as exporter:
        scrape(exporter.url)
    log = "".join(exporter.stderr_lines)
    assert 'msg="flag has no effect without --kubernetes" flag=--kubernetes-enable-pod-labels' in log


async def test_a_missing_pod_resources_socket_is_logged_plainly_and_used_once_it_appears(
    tmp_path: Path, sock_dir: Path
) -> None:
    socket = sock_dir / "kubelet.sock"
    args = ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "-c", "200"]
    exporter = await asyncio.to_thread(ExporterProcess([*args, "--pod-resources-socket", str(socket)]).start)
    try:
        page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
        assert page.named("kubegpu_exporter_pod_resources_up")[0].value == 0
        async with ListerServer(socket) as lister:
            lister.pods = [Pod("ml", "train", {"main": [("nvidia.com/gpu", [T4.gpus[3].uuid])]})]

            async def held() -> bool:
                page = exposition.parse(await asyncio.to_thread(scrape, exporter.url))
                return any(s.labels.get("pod") == "train" for s in page.named("DCGM_FI_DEV_GPU_TEMP"))

            await eventually(held, within=20, what="the pod's labels once the kubelet is up")
    finally:
        await asyncio.to_thread(exporter.stop)
    log = "".join(exporter.stderr_lines)
    assert f"pod-resources socket {socket}: no such socket (is the kubelet up?)" in log
    assert "FAILED_PRECONDITION" not in log and "add_port" not in log
