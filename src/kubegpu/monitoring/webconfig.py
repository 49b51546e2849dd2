"""The ``--web-config-file``: Prometheus exporter-toolkit's web configuration (TLS, client certificates, basic auth).

Owns parsing the YAML (unknown keys are errors, as the toolkit's strict loader makes them), building
the server's :class:`ssl.SSLContext` from it, and checking ``Authorization: Basic`` headers against
its bcrypt hashes (a successful check is cached, so a scrape does not pay bcrypt's cost each time).
Reads the certificate files it names; must not serve HTTP.

What the toolkit supports and Python's ``ssl`` cannot do is refused with a message, never silently
downgraded: ``RequestClientCert`` / ``RequireAnyClientCert`` (asking for a certificate without
verifying it). ``cipher_suites`` and ``curve_preferences`` take Go's names; the ciphers are mapped to
OpenSSL's, the curves are left to OpenSSL (logged). ``http2`` is accepted: we serve HTTP/1.1.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubegpu.monitoring.errors import MonitoringError

log = logging.getLogger(__name__)


class WebConfigError(MonitoringError, ValueError):
    """A web config that cannot be used; the message names the file and key."""


_TLS_KEYS = {
    "cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
    "client_allowed_sans", "min_version", "max_version", "cipher_suites", "prefer_server_cipher_suites",
    "curve_preferences",
}  # fmt: skip
_HTTP_KEYS = {"http2", "headers"}
_HEADERS = {
    "Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "X-XSS-Protection",
    "Strict-Transport-Security",
}  # fmt: skip
_TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = ("NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
                "RequireAndVerifyClientCert")  # fmt: skip
# Go's names for the TLS 1.2 suites it offers, and OpenSSL's for the same suites.
_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}


@dataclass(frozen=True)
class TlsSettings:
    """``tls_server_config`` with files resolved relative to the config file, as the toolkit does."""

    cert_file: Path | None = None
    key_file: Path | None = None
    cert: str | None = None
    key: str | None = None
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    client_ca: str | None = None
    client_allowed_sans: tuple[str, ...] = ()
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    cipher_suites: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebConfig:
    """A parsed web config. ``tls`` None means plain HTTP (the toolkit's rule: no certificate, no TLS)."""

    source: str
    tls: TlsSettings | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # user -> bcrypt hash
    headers: tuple[tuple[str, str], ...] = ()


def _mapping(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            raise WebConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(allowed))})")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise WebConfigError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WebConfigError(f"{where}: expected a list of strings")
    return tuple(value)


def parse(text: str, source: str, base: Path | None = None) -> WebConfig:
    """Parse a web config's text; relative file names are resolved against ``base`` (the file's directory)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from None
    top = _mapping(document, source, _TOP_KEYS)

    def path(value: Any, where: str) -> Path | None:
        if value is None or value == "":
            return None
        p = Path(_text(value, where))
        return p if p.is_absolute() or base is None else base / p

    tls_raw = _mapping(top.get("tls_server_config"), f"{source}: tls_server_config", _TLS_KEYS)
    where = f"{source}: tls_server_config"
    tls: TlsSettings | None = None
    if tls_raw:
        auth = _text(tls_raw.get("client_auth_type", "NoClientCert") or "NoClientCert", f"{where}.client_auth_type")
        if auth not in _CLIENT_AUTH:
            raise WebConfigError(
                f"{where}.client_auth_type: invalid ClientAuth {auth!r} (choose from {', '.join(_CLIENT_AUTH)})"
            )
        if auth in ("RequestClientCert", "RequireAnyClientCert"):
            raise WebConfigError(
                f"{where}.client_auth_type: {auth} (a certificate asked for but not verified) is not supported; "
                "use RequireAndVerifyClientCert or VerifyClientCertIfGiven"
            )
        for key in ("min_version", "max_version"):
            version = tls_raw.get(key)
            if version is not None and _text(version, f"{where}.{key}") not in _VERSIONS:
                raise WebConfigError(f"{where}.{key}: unknown TLS version {version!r} (TLS10 … TLS13)")
        ciphers = _strings(tls_raw.get("cipher_suites"), f"{where}.cipher_suites")
        for name in ciphers:
            if name not in _CIPHERS:
                raise WebConfigError(f"{where}.cipher_suites: unknown or unsupported cipher suite {name!r}")
        if tls_raw.get("curve_preferences"):
            log.warning("curve_preferences left to OpenSSL's defaults", extra={"file": source})
        tls = TlsSettings(
            cert_file=path(tls_raw.get("cert_file"), f"{where}.cert_file"),
            key_file=path(tls_raw.get("key_file"), f"{where}.key_file"),
            cert=_text(tls_raw["cert"], f"{where}.cert") if tls_raw.get("cert") else None,
            key=_text(tls_raw["key"], f"{where}.key") if tls_raw.get("key") else None,
            client_auth_type=auth,
            client_ca_file=path(tls_raw.get("client_ca_file"), f"{where}.client_ca_file"),
            client_ca=_text(tls_raw["client_ca"], f"{where}.client_ca") if tls_raw.get("client_ca") else None,
            client_allowed_sans=_strings(tls_raw.get("client_allowed_sans"), f"{where}.client_allowed_sans"),
            min_version=tls_raw.get("min_version") or "TLS12",
            max_version=tls_raw.get("max_version") or "TLS13",
            cipher_suites=ciphers,
        )
        has_cert = tls.cert_file is not None or tls.cert is not None
        has_key = tls.key_file is not None or tls.key is not None
        has_ca = tls.client_ca_file is not None or tls.client_ca is not None
        if not has_cert and not has_key:
            if has_ca or auth != "NoClientCert":
                raise WebConfigError(f"{where}: client certificates need cert_file and key_file")
            tls = None  # the toolkit serves plain HTTP when no certificate is configured
        elif not has_cert:
            raise WebConfigError(f"{where}: missing cert_file")
        elif not has_key:
            raise WebConfigError(f"{where}: missing key_file")
        elif has_ca and auth == "NoClientCert":
            raise WebConfigError(f"{where}: client CA's have been configured without a client_auth_type")
        elif auth != "NoClientCert" and not has_ca:
            raise WebConfigError(f"{where}: client_auth_type {auth} needs client_ca_file")
        elif tls.client_allowed_sans and auth != "RequireAndVerifyClientCert":
            raise WebConfigError(f"{where}: client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")

    http_raw = _mapping(top.get("http_server_config"), f"{source}: http_server_config", _HTTP_KEYS)
    headers_raw = _mapping(http_raw.get("headers"), f"{source}: http_server_config.headers", _HEADERS)
    headers = tuple((k, _text(v, f"{source}: http_server_config.headers.{k}")) for k, v in headers_raw.items() if v)

    users_raw = top.get("basic_auth_users") or {}
    if not isinstance(users_raw, dict):
        raise WebConfigError(f"{source}: basic_auth_users: expected a mapping of user to bcrypt hash")
    users: dict[str, str] = {}
    for user, hashed in users_raw.items():
        name = _text(user, f"{source}: basic_auth_users key")
        value = _text(hashed, f"{source}: basic_auth_users.{name}")
        if not value.startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"{source}: basic_auth_users.{name}: not a bcrypt hash ($2y$…)")
        users[name] = value
    if top.get("rate_limit"):
        log.warning("rate_limit is not applied", extra={"file": source})
    return WebConfig(source=source, tls=tls, users=users, headers=headers)


#: A web config is a few lines (inline certificates included); more than this is not one.
MAX_BYTES = 1 << 20


def load(path: Path) -> WebConfig:
    """Read and parse a web config file; raises :class:`WebConfigError` naming the file."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        why = exc.strerror if isinstance(exc, OSError) else None
        raise WebConfigError(f"{path}: cannot read: {why or exc}") from None
    if len(raw) > MAX_BYTES:
        raise WebConfigError(f"{path}: larger than {MAX_BYTES} bytes, not a web config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WebConfigError(f"{path}: not UTF-8 text") from None
    config = parse(text, str(path), path.parent)
    if config.tls is not None:
        ssl_context(config)  # certificate problems show at load, not at the first handshake
    return config


def ssl_context(config: WebConfig) -> ssl.SSLContext | None:
    """The server context the config asks for, None for plain HTTP; raises :class:`WebConfigError`."""
    tls = config.tls
    if tls is None:
        return None
    where = f"{config.source}: tls_server_config"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[tls.min_version]
    context.maximum_version = _VERSIONS[tls.max_version]
    if tls.cipher_suites:
        try:
            context.set_ciphers(":".join(_CIPHERS[c] for c in tls.cipher_suites))
        except ssl.SSLError as exc:
            raise WebConfigError(f"{where}.cipher_suites: {exc}") from None
    try:
        if tls.cert is not None or tls.key is not None:
            _load_inline_chain(context, tls, where)
        else:
            assert tls.cert_file is not None and tls.key_file is not None
            context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(f"{where}: cannot load the certificate/key: {_reason(exc)}") from None
    if tls.client_auth_type != "NoClientCert":
        try:
            if tls.client_ca_file is not None:
                context.load_verify_locations(cafile=str(tls.client_ca_file))
            if tls.client_ca is not None:
                context.load_verify_locations(cadata=tls.client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"{where}: cannot load the client CA: {_reason(exc)}") from None
        required = tls.client_auth_type == "RequireAndVerifyClientCert"
        context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    return context


def _load_inline_chain(context: ssl.SSLContext, tls: TlsSettings, where: str) -> None:
    """``cert``/``key`` given inline: OpenSSL loads chains from files only, so write them to a private temp dir."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kubegpu-tls-") as tmp:
        cert = Path(tmp) / "cert.pem"
        key = Path(tmp) / "key.pem"
        cert.write_text(tls.cert if tls.cert is not None else Path(str(tls.cert_file)).read_text())
        key.touch(mode=0o600)
        key.write_text(tls.key if tls.key is not None else Path(str(tls.key_file)).read_text())
        context.load_cert_chain(str(cert), str(key))


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def allowed_san(config: WebConfig, peer: Mapping[str, Any] | None) -> bool:
    """Whether a verified client certificate carries one of ``client_allowed_sans`` (True when none listed)."""
    if config.tls is None or not config.tls.client_allowed_sans:
        return True
    if not peer:
        return False
    names = {value for _kind, value in peer.get("subjectAltName", ())}
    return any(san in names for san in config.tls.client_allowed_sans)


class BasicAuth:
    """Checks ``Authorization`` headers against a config's users; caches passwords that matched.

    The cache key is a SHA-256 of user and password, so the cache holds no password.
    """

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)
        self._good: set[bytes] = set()

    @property
    def enabled(self) -> bool:
        return bool(self._users)

    def check(self, header: str | None) -> bool:
        """True when the header names a configured user with the right password. Blocking (bcrypt)."""
        if not self._users:
            return True
        credentials = _basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(user.encode() + b"\0" + password + b"\0" + hashed.encode()).digest()
        if key in self._good:
            return True
        import bcrypt

        try:
            ok = bcrypt.checkpw(password, hashed.encode())
        except ValueError:  # a malformed hash: parse() checks the prefix, bcrypt the rest
            return False
        if ok:
            self._good.add(key)
        return ok


def _basic_credentials(header: str | None) -> tuple[str, bytes] | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        return user.decode("utf-8"), password
    except UnicodeDecodeError:
        return None
