"""Human-readable tables for ``kubegpu kubelet status`` and ``admit`` (``--json`` prints the raw objects).

Owns turning the control API's answers into aligned plain-text tables. Pure:
dicts in, a string out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "") -> str:
    cells = [[str(c) for c in headers], *[[("-" if c is None else str(c)) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _endpoint(resource: Mapping[str, Any]) -> str:
    ep = resource.get("endpoint")
    if resource.get("removed"):
        return "removed after grace period"
    if ep is None:
        return "-"
    where = Path(ep["socket"]).name if ep.get("socket") else "restored from checkpoint"
    opts = ep.get("options") or {}
    flags = [
        n
        for n, k in (("pre-start", "pre_start_required"), ("preferred", "get_preferred_allocation_available"))
        if opts.get(k)
    ]
    state = f"stopped {ep['stopped_for_s']:.0f}s ago" if ep.get("stopped") else "live"
    return f"{where} ({state}{', ' + ', '.join(flags) if flags else ''})"


def status(data: Mapping[str, Any]) -> str:
    resources: Mapping[str, Any] = data.get("resources", {})
    pods: Sequence[Mapping[str, Any]] = data.get("pods", [])
    holders: dict[tuple[str, str], str] = {}
    for p in pods:
        for container, held in p["containers"].items():
            for resource, ids in held.items():
                for device in ids:
                    holders[(resource, device)] = f"{p['namespace']}/{p['name']}/{container}"
    out = []
    rows: list[tuple[object, ...]]
    if not resources:
        out.append("no device-plugin resources registered")
    else:
        rows = [
            (name, r["capacity"], r["allocatable"], len(r.get("allocated", [])), _endpoint(r))
            for name, r in resources.items()
        ]
        out.append(table(("RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "ENDPOINT"), rows))
    for name, r in resources.items():
        if not r["devices"]:
            continue
        out.append("")
        out.append(f"{name} devices:")
        rows = [
            (d["id"], d["health"], ",".join(map(str, d["numa"])) or None, holders.get((name, d["id"])))
            for d in r["devices"]
        ]
        out.append(table(("ID", "HEALTH", "NUMA", "HELD BY"), rows, indent="  "))
    out.append("")
    if not pods:
        out.append("no pods")
    else:
        rows = []
        for p in pods:
            for container, held in p["containers"].items():
                for resource, ids in held.items() or [("-", [])]:
                    rows.append((f"{p['namespace']}/{p['name']}", container, resource, ", ".join(ids) or None))
        out.append(table(("POD", "CONTAINER", "RESOURCE", "DEVICES"), rows))
    agent: Mapping[str, Any] | None = data.get("agent")
    if agent:
        out.append("")
        state = "registered" if agent.get("registered") else "not registered yet"
        out.append(
            f"node agent: Node {agent.get('node_name')} {state}; {agent.get('status_updates', 0)} status updates, "
            f"{agent.get('lease_renewals', 0)} lease renewals; pods running {agent.get('running', 0)}, "
            f"rejected {agent.get('rejected', 0)}, deletions finished {agent.get('deleted', 0)}"
        )
    return "\n".join(out)


def admitted(data: Mapping[str, Any]) -> str:
    pod = data["pod"]
    calls = data.get("allocate_rpcs", 0)
    out = [
        f"pod {pod['namespace']}/{pod['name']} (uid {pod['uid']}) admitted; "
        f"{calls} Allocate RPC{'s' if calls != 1 else ''}"
    ]
    for name, c in data["containers"].items():
        kind = "init container" if c.get("init") else "container"
        if c.get("restartable"):
            kind = "sidecar (restartable init container)"
        out.append("")
        out.append(f"{kind} {name}")
        rows: list[tuple[str, str]] = []
        for resource, ids in c.get("resources", {}).items():
            rows.append(("resource", f"{resource}: {', '.join(ids)}"))
        if c.get("numa_affinity") is not None:
            rows.append(("numa affinity", ",".join(map(str, c["numa_affinity"]))))
        for key, value in c.get("envs", {}).items():
            rows.append(("env", f"{key}={value}"))
        for m in c.get("mounts", []):
            rows.append(("mount", f"{m['host_path']} -> {m['container_path']}{' (ro)' if m['read_only'] else ''}"))
        for d in c.get("devices", []):
            rows.append(("device", f"{d['host_path']} -> {d['container_path']} ({d['permissions']})"))
        for key, value in c.get("annotations", {}).items():
            rows.append(("annotation", f"{key}={value}"))
        for name_ in c.get("cdi_devices", []):
            rows.append(("cdi device", name_))
        for conflict in c.get("conflicts", []):
            rows.append(("conflict", conflict))
        if "error" in c:
            rows.append(("error", c["error"]))
        out.append(table(("WHAT", "VALUE"), rows, indent="  ") if rows else "  (no devices)")
    return "\n".join(out)
