"""``--web-config-file``: exporter-toolkit's format parsed strictly, and honoured over real TLS by a real exporter."""

from __future__ import annotations

import base64
import http.client
import signal
import ssl
from pathlib import Path

import bcrypt
import pytest
import trustme

from kubegpu.monitoring import webconfig
from kubegpu.monitoring.webconfig import WebConfigError
from tests.monitoring.exporter_process import ExporterProcess
from tests.polling import wait_until

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()  # low cost: a test, not a deployment


def parse(text: str, base: Path | None = None) -> webconfig.WebConfig:
    return webconfig.parse(text, "web.yml", base)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config: {cert_file: a, key_file: b, sni: x}", "web.yml: tls_server_config: unknown key 'sni'"),
        ("basic_auth: {}", "web.yml: unknown key 'basic_auth'"),
        ("tls_server_config: {cert_file: a, key_file: b, client_auth_type: Sometimes}",
         "invalid ClientAuth 'Sometimes'"),
        ("tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequestClientCert, client_ca_file: c}",
         "RequestClientCert (a certificate asked for but not verified) is not supported"),
        ("tls_server_config: {cert_file: a, key_file: b, client_ca_file: c}",
         "client CA's have been configured without a client_auth_type"),
        ("tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequireAndVerifyClientCert}",
         "client_auth_type RequireAndVerifyClientCert needs client_ca_file"),
        ("tls_server_config: {cert_file: a}", "missing key_file"),
        ("tls_server_config: {key_file: a}", "missing cert_file"),
        ("tls_server_config: {cert_file: a, key_file: b, min_version: TLS14}", "unknown TLS version 'TLS14'"),
        ("tls_server_config: {cert_file: a, key_file: b, cipher_suites: [TLS_FAST]}", "unknown or unsupported cipher"),
        ("basic_auth_users: {alice: plaintext}", "basic_auth_users.alice: not a bcrypt hash"),
        ("basic_auth_users: [alice]", "basic_auth_users: expected a mapping"),
        ("[1, 2]", "web.yml: expected a mapping, got list"),
        ("a: [", "web.yml: not YAML"),
    ],
    ids=["unknown-tls-key", "unknown-top-key", "client-auth", "unverified-client-cert", "ca-without-auth",
         "auth-without-ca", "no-key", "no-cert", "version", "cipher", "not-bcrypt", "users-list", "not-mapping",
         "not-yaml"],
)  # fmt: skip
def test_a_bad_web_config_names_the_file_and_key(text: str, message: str) -> None:
    with pytest.raises(WebConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_no_certificate_means_plain_http_and_relative_files_are_beside_the_config(tmp_path: Path) -> None:
    assert parse(f"basic_auth_users: {{alice: '{HASH}'}}").tls is None
    config = parse("tls_server_config: {cert_file: tls/c.pem, key_file: /abs/k.pem}", tmp_path)
    assert config.tls is not None
    assert (config.tls.cert_file, config.tls.key_file) == (tmp_path / "tls/c.pem", Path("/abs/k.pem"))


def test_a_certificate_that_does_not_load_is_an_error_at_load(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text("tls_server_config: {cert_file: missing.pem, key_file: missing.key}\n")
    with pytest.raises(WebConfigError, match=f"{path}: tls_server_config: cannot load the certificate/key"):
        webconfig.load(path)
    with pytest.raises(WebConfigError, match="cannot read"):
        webconfig.load(tmp_path / "absent.yml")
    with pytest.raises(WebConfigError, match="larger than"):
        webconfig.load(Path("/dev/zero"))
    with pytest.raises(WebConfigError, match="not UTF-8"):
        (tmp_path / "bin.yml").write_bytes(b"\xff\xfe")
        webconfig.load(tmp_path / "bin.yml")


def test_basic_auth_checks_user_and_password_and_caches_the_match() -> None:
    auth = webconfig.BasicAuth({"alice": HASH})

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert auth.check(header("alice", "s3cret")) and auth.check(header("alice", "s3cret"))
    assert not auth.check(header("alice", "wrong"))
    assert not auth.check(header("bob", "s3cret"))
    assert not auth.check(None) and not auth.check("Bearer x") and not auth.check("Basic %%%")
    assert webconfig.BasicAuth({}).check(None)


# --- a real exporter over real TLS ------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_files(ca: trustme.CA, where: Path) -> tuple[Path, Path]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = where / "server.pem", where / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    return cert_file, key_file


def client_context(ca: trustme.CA, client: trustme.LeafCert | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    if client is not None:
        client.configure_cert(context)
    return context


def request(
    port: int, context: ssl.SSLContext | None, headers: dict[str, str] | None = None, path: str = "/metrics"
) -> tuple[int, dict[str, str], bytes]:
    conn: http.client.HTTPConnection
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def exporter(tmp_path: Path, web: Path, *extra: str) -> ExporterProcess:
    return ExporterProcess(
        ["--machine", "pcie-4xt4", "--fault-file", str(tmp_path / "f.jsonl"), "--web-config-file", str(web), *extra]
    )


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_tls_and_basic_auth_are_enforced(tmp_path: Path, ca: trustme.CA) -> None:
    cert_file, key_file = server_files(ca, tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config: {{cert_file: {cert_file.name}, key_file: {key_file.name}, min_version: TLS12}}\n"
        "http_server_config: {headers: {X-Frame-Options: deny}}\n"
        f"basic_auth_users: {{prometheus: '{HASH}'}}\n"
    )
    with exporter(tmp_path, web) as running:
        status, headers, body = request(running.port, client_context(ca), basic("prometheus", "s3cret"))
        assert status == 200 and b"DCGM_FI_DEV_GPU_TEMP{" in body
        assert headers["X-Frame-Options"] == "deny"
        status, headers, _ = request(running.port, client_context(ca))
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert request(running.port, client_context(ca), basic("prometheus", "guess"))[0] == 401
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            request(running.port, None, basic("prometheus", "s3cret"))  # plain HTTP to the TLS port
        log = "".join(running.stderr_lines)
    assert "tls=true" in log


def test_client_certificates_are_required_verified_and_matched_by_san(tmp_path: Path, ca: trustme.CA) -> None:
    cert_file, key_file = server_files(ca, tmp_path)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config: {{cert_file: {cert_file}, key_file: {key_file}, client_ca_file: {ca_file},\n"
        "  client_auth_type: RequireAndVerifyClientCert, client_allowed_sans: [prometheus.monitoring.svc]}\n"
    )
    other_ca = trustme.CA()
    with exporter(tmp_path, web) as running:
        good = ca.issue_cert("prometheus.monitoring.svc")
        assert request(running.port, client_context(ca, good))[0] == 200
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            request(running.port, client_context(ca))  # no client certificate
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            request(running.port, client_context(ca, other_ca.issue_cert("prometheus.monitoring.svc")))
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            request(running.port, client_context(ca, ca.issue_cert("intruder.example")))  # SAN not allowed


def test_sighup_reloads_counters_and_web_config_and_keeps_them_when_the_new_ones_are_bad(
    tmp_path: Path, ca: trustme.CA
) -> None:
    cert_file, key_file = server_files(ca, tmp_path)
    web = tmp_path / "web.yml"
    tls = f"tls_server_config: {{cert_file: {cert_file}, key_file: {key_file}}}\n"
    web.write_text(tls + f"basic_auth_users: {{alice: '{HASH}'}}\n")
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_GPU_TEMP, gauge, Temp.\n")
    context = client_context(ca)
    with exporter(tmp_path, web, "-f", str(csv), "-c", "100000") as running:
        assert running.proc is not None
        assert b"DCGM_FI_DEV_POWER_USAGE" not in request(running.port, context, basic("alice", "s3cret"))[2]
        csv.write_text("DCGM_FI_DEV_POWER_USAGE, gauge, Power.\n")
        bob = bcrypt.hashpw(b"hunter2", bcrypt.gensalt(rounds=4)).decode()
        web.write_text(tls + f"basic_auth_users: {{bob: '{bob}'}}\n")
        running.proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: b"DCGM_FI_DEV_POWER_USAGE{" in request(running.port, context, basic("bob", "hunter2"))[2],
            what="the reloaded counters and users",
        )
        assert request(running.port, context, basic("alice", "s3cret"))[0] == 401
        csv.write_text("not a counters file\n")
        web.write_text("tls_server_config: {nonsense: 1}\n")
        running.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "web config rejected" in "".join(running.stderr_lines), what="the rejection logged")
        log = "".join(running.stderr_lines)
        assert "counters file rejected, keeping the running one" in log
        status, _, body = request(running.port, context, basic("bob", "hunter2"))
        assert status == 200 and b"DCGM_FI_DEV_POWER_USAGE{" in body
        assert running.proc.poll() is None
    assert running.proc.returncode == 0


def test_an_inline_certificate_and_key_build_a_server_context(ca: trustme.CA) -> None:
    cert = ca.issue_cert("127.0.0.1")
    text = (
        "tls_server_config:\n"
        f"  cert: |\n{_indent(cert.cert_chain_pems[0].bytes().decode())}"
        f"  key: |\n{_indent(cert.private_key_pem.bytes().decode())}"
        "  max_version: TLS12\n"
    )
    context = webconfig.ssl_context(parse(text))
    assert context is not None and context.maximum_version == ssl.TLSVersion.TLSv1_2


def _indent(pem: str) -> str:
    return "".join(f"    {line}\n" for line in pem.splitlines())


def test_sighup_serves_a_renewed_certificate_to_new_connections(tmp_path: Path, ca: trustme.CA) -> None:
    cert_file, key_file = server_files(ca, tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config: {{cert_file: {cert_file}, key_file: {key_file}}}\n")
    renewed_ca = trustme.CA()
    with exporter(tmp_path, web) as running:
        assert running.proc is not None
        assert request(running.port, client_context(ca))[0] == 200
        server_files(renewed_ca, tmp_path)  # the certificate rotated on disk (same file names)
        running.proc.send_signal(signal.SIGHUP)

        def renewed() -> bool:
            try:
                return request(running.port, client_context(renewed_ca))[0] == 200
            except (ssl.SSLError, ConnectionError):
                return False

        wait_until(renewed, what="the renewed certificate served")
        with pytest.raises(ssl.SSLError):
            request(running.port, client_context(ca))  # the old CA no longer vouches for what is served
