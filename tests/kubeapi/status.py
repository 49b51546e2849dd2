"""Status objects: the API server's error answers, in the real kube-apiserver's shapes.

Owns the mapping from a failure (not found, conflict, invalid, ...) to the HTTP code, ``reason`` and
``message`` a real server sends, as one exception type the request handlers raise. It must not know
about HTTP frameworks or the store.
"""

from __future__ import annotations

from typing import Any


class StatusError(Exception):
    """A request failed; ``body`` is the ``Status`` object to send with HTTP ``code``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    @property
    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failed ``Status`` as the real server writes it (``metadata`` always present, ``details`` when known)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
    }
    if reason:  # errors the server did not classify carry no reason
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    return body


def success_body(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``Status`` with ``status: Success`` (binding, eviction and delete of most kinds answer this)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details is not None:
        body["details"] = details
    return body


def _details(group: str, plural: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": plural}
    if name is not None:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> StatusError:
    return StatusError(
        404, "NotFound", f'{_qualified(group, plural)} "{name}" not found', _details(group, plural, name)
    )


def already_exists(group: str, plural: str, name: str) -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{_qualified(group, plural)} "{name}" already exists', _details(group, plural, name)
    )


def conflict(group: str, plural: str, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """422 Invalid; ``causes`` are (field, reason type, message) as field validation reports them."""
    text = ", ".join(f"{field}: {msg}" for field, _, msg in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": reason, "message": msg, "field": field} for field, reason, msg in causes],
    }
    if group:
        details["group"] = group
    return StatusError(422, "Invalid", f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}', details)


def forbidden(group: str, plural: str, name: str, why: str) -> StatusError:
    return StatusError(
        403, "Forbidden", f'{_qualified(group, plural)} "{name}" is forbidden: {why}', _details(group, plural, name)
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def gone(requested: int, oldest: int) -> StatusError:
    """410 Expired: a watch asked for history that has been compacted."""
    return StatusError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def too_many_requests(message: str, retry_after: int = 1, causes: list[dict[str, str]] | None = None) -> StatusError:
    details: dict[str, Any] = {"retryAfterSeconds": retry_after}
    if causes:
        details["causes"] = causes
    return StatusError(429, "TooManyRequests", message, details, headers={"Retry-After": str(retry_after)})


def internal_error(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def page_not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})
