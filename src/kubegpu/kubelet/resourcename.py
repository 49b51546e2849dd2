"""Extended resource names: which names a device plugin may register.

Owns the kubelet's ``IsExtendedResourceName`` rule and the exact rejection
text of ``Register``. Pure: no I/O.

The rule (Kubernetes ``v1helper.IsExtendedResourceName``): a name is *native*
when it has no ``/`` or contains ``kubernetes.io/`` anywhere; native names and
names starting ``requests.`` are not extended. Otherwise ``requests.`` + name
must be a qualified name: at most one ``/``, a DNS-1123 subdomain prefix, and
a 1-63 character name part of alphanumerics and ``-_.`` that begins and ends
alphanumeric.
"""

from __future__ import annotations

import re

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME_MAX = 63
_REQUESTS_PREFIX = "requests."
_NATIVE_NAMESPACE = "kubernetes.io/"


def invalid_message(name: str) -> str:
    """The kubelet's ``Register`` error for a name that is not an extended resource name."""
    return f'the ResourceName "{name}" is invalid'


def is_native(name: str) -> bool:
    """A resource without a prefix, or in the ``kubernetes.io`` namespace (``cpu``, ``kubernetes.io/x``)."""
    return "/" not in name or _NATIVE_NAMESPACE in name


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a Kubernetes qualified name (empty when it is)."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > _DNS1123_SUBDOMAIN_MAX:
            errors.append(f"prefix part must be no more than {_DNS1123_SUBDOMAIN_MAX} characters")
        elif not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part must be a lowercase RFC 1123 subdomain")
    else:
        return ["a qualified name must have at most one '/'"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and start and end alphanumeric"
        )
    return errors


def is_extended(name: str) -> bool:
    """True when a device plugin may register ``name`` (the kubelet's ``IsExtendedResourceName``)."""
    if is_native(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    # The kubelet checks the name as it would appear in a quota ("requests.<name>"), so the
    # prefix part is validated with "requests." in front of it.
    return not qualified_name_errors(_REQUESTS_PREFIX + name)
