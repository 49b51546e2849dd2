"""Benchmark the node-side lookup of the scheduler's pick: what honouring it adds to GetPreferredAllocation.

A node (default ``dgx-a100``) with ``--pods`` pods bound to it in the API (a quarter Running, the rest
Pending, half of those annotated with ``kubegpu.io/gpu-devices``), the plugin's pod cache
(:class:`kubegpu.deviceplugin.plugin.pods.NodePods`) synced by list+watch, then per call, ``--calls`` times:

* ``policy``: the plugin's own placement policy alone (today's GetPreferredAllocation work);
* ``hit``: the pod being admitted is annotated and cached — the rule over the cache, no API call;
* ``miss``: the pod is not annotated (or not cached yet) — the rule, a consistent re-list of the node's
  pods from the API server, the rule again, then the policy.

Prints p50/p99 per case in milliseconds, and with ``--json`` one JSON object. Runs against the in-process API
server of the test suite (``tests/kubeapi``) unless ``--kubeconfig FILE`` names a cluster (then it creates
and deletes its pods in namespace ``--namespace``, which must exist). Timings on a shared machine are noisy.

    python bench/pick_lookup.py [--pods 40] [--calls 300] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubegpu import kubeconfig
from kubegpu.deviceplugin.plugin.pods import NodePods
from kubegpu.deviceplugin.rm import preferred, resource_map
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu import profiles


def _config() -> Any:
    from kubegpu.deviceplugin.config import effective

    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    result = effective.resolve(effective.PLUGIN_FLAGS, parser.parse_args([]), {}, None)
    return result


def _pod(name: str, namespace: str, node: str, ids: list[str], annotated: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotated:
        meta["annotations"] = {"kubegpu.io/gpu-devices": ",".join(ids)}
    limits = {"nvidia.com/gpu": str(len(ids))}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 3), "p99_ms": round(p99 * 1e3, 3)}


async def _measure(config_path: str | None, namespace: str, pods: int, calls: int, machine_name: str) -> dict[str, Any]:
    from lightkube.resources.core_v1 import Pod

    machine = profiles.load(machine_name)
    resource: Resource = resource_map.build(machine, _config()).resources[0]
    policy = preferred.Preferred(resource, machine.topology, "topology")
    ids = [d.id for d in resource.devices]
    node = f"bench-{uuid.uuid4().hex[:6]}"
    client = kubeconfig.client(config_path)
    names: list[str] = []
    for n in range(pods):
        pod = _pod(f"{node}-{n}", namespace, node, ids[n % len(ids) : n % len(ids) + 1], annotated=n % 2 == 0)
        created = await client.create(Pod.from_dict(pod), namespace=namespace)
        names.append(f"{node}-{n}")
        if n % 4 == 3:
            await client.patch(Pod.Status, created.metadata.name, {"status": {"phase": "Running"}}, namespace=namespace)
    target = _pod(f"{node}-target", namespace, node, ids[2:4], annotated=True)
    await client.create(Pod.from_dict(target), namespace=namespace)
    plain = _pod(f"{node}-plain", namespace, node, ids[:3], annotated=False)
    await client.create(Pod.from_dict(plain), namespace=namespace)
    names += [f"{node}-target", f"{node}-plain"]
    cache = NodePods(node, kubeconfig.client(config_path))
    cache.start()
    await asyncio.wait_for(cache.synced.wait(), 30)
    results: dict[str, list[float]] = {"policy": [], "hit": [], "miss": []}
    try:
        for _ in range(calls):
            began = time.perf_counter()
            policy(ids, [], 2)
            results["policy"].append(time.perf_counter() - began)
            began = time.perf_counter()
            got = await cache.preferred(resource, ids, [], 2)
            results["hit"].append(time.perf_counter() - began)
            assert got == ids[2:4], got
            began = time.perf_counter()
            got = await cache.preferred(resource, ids, [], 3)
            if got is None:
                policy(ids, [], 3)
            results["miss"].append(time.perf_counter() - began)
            assert got is None, got
    finally:
        await cache.stop()
        for name in names:
            await client.delete(Pod, name, namespace=namespace, grace_period=0)
        await client.close()
    return {
        "machine": machine_name,
        "pods_on_node": pods + 2,
        "calls": calls,
        "relists": cache.relists,
        **{case: _percentiles(samples) for case, samples in results.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--machine", default="dgx-a100")
    parser.add_argument("--kubeconfig", default=None, help="a real cluster instead of the in-process API server")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.kubeconfig:
        result = asyncio.run(_measure(args.kubeconfig, args.namespace, args.pods, args.calls, args.machine))
    else:
        from tests.kubeapi.server import KubeApiServer

        with KubeApiServer() as server:
            result = asyncio.run(_measure(str(server.kubeconfig), args.namespace, args.pods, args.calls, args.machine))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['machine']}: {result['pods_on_node']} pods on the node, {result['calls']} calls per case")
    for case in ("policy", "hit", "miss"):
        print(f"  {case:<7} p50 {result[case]['p50_ms']:>8.3f} ms   p99 {result[case]['p99_ms']:>8.3f} ms")
    print(f"  relists: {result['relists']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
