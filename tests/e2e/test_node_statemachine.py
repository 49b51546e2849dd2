"""Random admit / delete / fault / recover / kubelet restart / plugin restart on real processes.

The kubelet emulator and the device plugin run as separate processes on a
simulated DGX A100 (``kubegpu.demo.localnode``). After every step: no device is held
by two live containers, every pod admitted and not deleted still holds exactly
the devices it was given (nothing lost across restarts), and a pod is only
ever given devices that were healthy when it was admitted.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubegpu.demo.localnode import LocalNode, pod_manifest
from kubegpu.gpu import faults, profiles
from kubegpu.kubelet import client, errors

RESOURCE = "nvidia.com/gpu"
MACHINE = profiles.load("dgx-a100")
GPUS = len(MACHINE.gpus)


def _resource(status: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, dict[str, Any]] = status["resources"]
    return resources.get(RESOURCE, {"capacity": 0, "allocatable": 0, "devices": []})


class Node(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.node = LocalNode(machine=MACHINE.name, plugin_args=["--health-recovery-quiet-period", "0"])
        self.unhealthy: set[int] = set()
        self.live: dict[str, list[str]] = {}
        self.serial = 0
        try:
            self.node.start_kubelet()
            self.node.start_plugin()
            self._settle()
        except BaseException:
            self.node.close()  # hypothesis calls teardown() only for a machine that was built
            raise

    def _settle(self) -> dict[str, Any]:
        """Wait until the emulator shows the plugin registered with the health we expect."""
        healthy = GPUS - len(self.unhealthy)
        return self.node.wait_for(
            lambda s: _resource(s)["capacity"] == GPUS and _resource(s)["allocatable"] == healthy, timeout=60
        )

    def _free_healthy(self) -> int:
        held = {d for ids in self.live.values() for d in ids}
        return sum(1 for g in MACHINE.gpus if g.index not in self.unhealthy and g.uuid not in held)

    @rule(size=st.sampled_from([1, 2, 4]))
    def admit(self, size: int) -> None:
        self.serial += 1
        name = f"p{self.serial}"
        fits = self._free_healthy() >= size
        healthy_before = {g.uuid for g in MACHINE.gpus if g.index not in self.unhealthy}
        try:
            result = self.node.admit(pod_manifest(name, size, namespace="sm"))
        except errors.ControlError:
            assert not fits, f"a {size}-GPU pod was rejected with {self._free_healthy()} healthy GPUs free"
            return
        assert fits, f"a {size}-GPU pod was admitted with only {self._free_healthy()} healthy GPUs free"
        ids = sorted(result["containers"]["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(","))
        assert len(ids) == size and set(ids) <= healthy_before
        self.live[f"sm/{name}"] = ids

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.live)))
        self.node.delete(target)
        del self.live[target]

    @rule(gpu=st.integers(0, GPUS - 1), xid=st.sampled_from([48, 79, 94]))
    def fault(self, gpu: int, xid: int) -> None:
        self.node.inject(faults.Fault(kind="xid", gpu=gpu, xid=xid))
        self.unhealthy.add(gpu)
        self._settle()

    @precondition(lambda self: bool(self.unhealthy))
    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        gpu = data.draw(st.sampled_from(sorted(self.unhealthy)))
        self.node.inject(faults.Fault(kind="recover", gpu=gpu))
        self.unhealthy.discard(gpu)
        self._settle()

    @rule(crash=st.booleans())
    def restart_kubelet(self, crash: bool) -> None:
        self.node.stop("kubelet", signal.SIGKILL if crash else signal.SIGTERM)
        self.node.start_kubelet()
        self._settle()

    @rule(hup=st.booleans())
    def restart_plugin(self, hup: bool) -> None:
        if hup:
            with client.watch(self.node.socket_dir, timeout=60) as events:
                next(events)
                os.kill(self.node.procs["plugin"].pid, signal.SIGHUP)
                next(e for e in events if e.get("event") == "registered")
        else:
            self.node.stop("plugin")
            self.node.start_plugin()
        # A restarted plugin starts every device Healthy, unless the fault is lasting (a lost GPU).
        self.unhealthy.clear()
        self._settle()

    @invariant()
    def allocations_are_exactly_those_of_live_pods_and_never_shared(self) -> None:
        status = self.node.status()
        reported = {
            f"{p['namespace']}/{p['name']}": sorted(d for c in p["containers"].values() for d in c.get(RESOURCE, []))
            for p in status["pods"]
        }
        assert reported == self.live
        held = Counter(d for ids in reported.values() for d in ids)
        assert all(count == 1 for count in held.values()), held

    def teardown(self) -> None:
        self.node.close()


Node.TestCase.settings = settings(
    max_examples=int(os.environ.get("KUBEGPU_SM_EXAMPLES", "3")),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.timeout(600)
class TestNodeStateMachine(Node.TestCase):  # type: ignore[name-defined,misc]
    pass
