"""JSON schemas of the custom resources the chart makes, for the objects kubernetes-validate has no schema for.

Written here from the facts of the public CRDs (prometheus-operator's ``monitoring.coreos.com/v1`` ServiceMonitor and
PrometheusRule: field names, required fields, types and the Prometheus duration pattern), restricted to the
fields a chart like ours may use and strict (no unknown keys) like the API server's structural-schema pruning is
for our purposes. The PodGroup schema is the CRD's own (``deploy/helm/kubegpu/files/crds/podgroups.yaml``), read by
:func:`from_crd`. Must not vendor third-party files.
"""

from __future__ import annotations

from typing import Any

#: prometheus-operator's Duration type (``30s``, ``1h30m``, ``0``).
DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}, "namespace": {"type": "string"}, "labels": _STRING_MAP},
}


def _object(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
    }


SERVICE_MONITOR = _object(
    "ServiceMonitor",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["selector"],
        "properties": {
            "selector": _LABEL_SELECTOR,
            "namespaceSelector": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "any": {"type": "boolean"},
                    "matchNames": {"type": "array", "items": {"type": "string"}},
                },
            },
            "jobLabel": {"type": "string"},
            "targetLabels": {"type": "array", "items": {"type": "string"}},
            "podTargetLabels": {"type": "array", "items": {"type": "string"}},
            "sampleLimit": {"type": "integer", "minimum": 0},
            "endpoints": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "targetPort": {"type": ["integer", "string"]},
                        "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                        "interval": DURATION,
                        "scrapeTimeout": DURATION,
                        "honorLabels": {"type": "boolean"},
                        "honorTimestamps": {"type": "boolean"},
                        "relabelings": {"type": "array", "items": {"type": "object"}},
                        "metricRelabelings": {"type": "array", "items": {"type": "object"}},
                    },
                },
            },
        },
    },
)

_RULE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expr"],
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "minLength": 1},
        "expr": {"type": ["string", "integer"]},
        "for": DURATION,
        "keep_firing_for": DURATION,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}

PROMETHEUS_RULE = _object(
    "PrometheusRule",
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "interval": DURATION,
                        "query_offset": DURATION,
                        "limit": {"type": "integer"},
                        "partial_response_strategy": {
                            "type": "string",
                            "pattern": "^([Aa][Bb][Oo][Rr][Tt]|[Ww][Aa][Rr][Nn])?$",
                        },
                        "labels": _STRING_MAP,
                        "rules": {"type": "array", "items": _RULE},
                    },
                },
            }
        },
    },
)

#: (apiVersion, kind) -> schema, for what kubernetes-validate does not know.
SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
}


def from_crd(crd: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Schemas of every served version of a CustomResourceDefinition (its ``openAPIV3Schema``), by apiVersion/kind."""
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"]
    return {
        (f"{group}/{version['name']}", kind): version["schema"]["openAPIV3Schema"]
        for version in crd["spec"]["versions"]
        if version.get("served", True)
    }
