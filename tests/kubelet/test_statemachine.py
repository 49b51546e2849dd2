"""Random sequences of admit / delete / fault / recover / emulator restart / plugin restart.

Invariants after every step: no device is held by two live containers (a
completed init container is not live; its devices may be reused by later
containers of its pod), and the allocations the emulator reports are exactly
those of the pods admitted and not deleted: nothing is lost across restarts,
a rejected pod changes nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubegpu.kubelet import errors, pod
from kubegpu.kubelet.daemon import Daemon, Options
from tests.kubelet.conftest import capacity
from tests.kubelet.stubplugin import StubDevice, StubPlugin
from tests.polling import eventually

R = "example.com/gpu"
N = 4


class EmulatorWithPlugin(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="kg-", dir="/tmp"))
        self.socket_dir = self.root / "device-plugins"
        self.health = {f"dev-{i}": "Healthy" for i in range(N)}
        self.generation = 0
        self.daemon: Daemon | None = None
        self.stub: StubPlugin | None = None
        #: What the emulator must report: pod name -> container -> devices.
        self.model: dict[str, dict[str, list[str]]] = {}
        self.live: dict[str, set[str]] = {}
        self.counter = 0
        self.run(self.start_emulator())
        self.run(self.start_plugin())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def start_emulator(self) -> None:
        self.daemon = Daemon(Options(socket_dir=self.socket_dir, dial_timeout=3.0))
        await self.daemon.start()

    async def start_plugin(self) -> None:
        assert self.daemon is not None
        self.generation += 1
        devs = [StubDevice(d, h) for d, h in self.health.items()]
        self.stub = StubPlugin(self.socket_dir, R, devs, endpoint=f"gen{self.generation}.sock")
        await self.stub.start()
        await self.stub.register()
        healthy = sum(h == "Healthy" for h in self.health.values())
        await eventually(lambda: capacity(self.daemon) == (N, healthy))  # type: ignore[arg-type]

    def status(self) -> dict[str, Any]:
        assert self.daemon is not None
        return self.daemon.node.status()

    def reported(self) -> dict[str, dict[str, list[str]]]:
        return {p["name"]: {c: sorted(r.get(R, [])) for c, r in p["containers"].items()} for p in self.status()["pods"]}

    @rule(
        sizes=st.lists(st.integers(0, 3), min_size=1, max_size=2),
        init=st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=2),
    )
    def admit(self, sizes: list[int], init: list[tuple[int, bool]]) -> None:
        self.counter += 1
        name = f"p{self.counter}"
        spec: dict[str, Any] = {
            "containers": [{"name": f"c{i}", "resources": {"limits": {R: k}}} for i, k in enumerate(sizes)],
            "initContainers": [
                {"name": f"i{i}", "resources": {"limits": {R: k}}, **({"restartPolicy": "Always"} if side else {})}
                for i, (k, side) in enumerate(init)
            ],
        }
        p = pod.parse({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
        before = self.reported()
        assert self.daemon is not None
        try:
            self.run(self.daemon.node.admit(p))
        except errors.ControlError as exc:
            assert exc.reason == "UnexpectedAdmissionError", exc.message
            assert self.reported() == before
            return
        got = self.reported()[name]
        self.model[name] = got
        live = set()
        for c in p.all_containers():
            if not c.init or c.restartable:
                live.add(c.name)
        self.live[name] = live

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        assert self.daemon is not None
        self.run(self.daemon.node.delete("default", name))
        del self.model[name]
        del self.live[name]

    @rule(device=st.integers(0, N - 1), healthy=st.booleans())
    def fault_or_recover(self, device: int, healthy: bool) -> None:
        device_id = f"dev-{device}"
        self.health[device_id] = "Healthy" if healthy else "Unhealthy"
        assert self.stub is not None
        self.stub.set_health(device_id, self.health[device_id])
        want = sum(h == "Healthy" for h in self.health.values())
        self.run(eventually(lambda: capacity(self.daemon) == (N, want)))  # type: ignore[arg-type]

    @rule()
    def restart_emulator(self) -> None:
        assert self.daemon is not None and self.stub is not None
        self.run(self.daemon.stop())
        self.run(self.stub.stop())
        self.run(self.start_emulator())
        # Like a real plugin seeing kubelet.sock created again: serve on a fresh socket and register.
        self.run(self.start_plugin())

    @rule()
    def restart_plugin(self) -> None:
        assert self.stub is not None
        self.run(self.stub.stop())
        self.run(self.start_plugin())

    @invariant()
    def no_device_is_held_by_two_live_containers(self) -> None:
        holders: dict[str, str] = {}
        for name, containers in self.reported().items():
            for container, ids in containers.items():
                if container not in self.live.get(name, set()):
                    continue
                for device in ids:
                    assert device not in holders, f"{device} held by {holders[device]} and {name}/{container}"
                    holders[device] = f"{name}/{container}"

    @invariant()
    def allocations_are_exactly_those_of_admitted_pods(self) -> None:
        assert self.reported() == self.model

    def teardown(self) -> None:
        try:
            if self.stub is not None:
                self.run(self.stub.stop())
            if self.daemon is not None:
                self.run(self.daemon.stop())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)


EmulatorWithPlugin.TestCase.settings = settings(
    max_examples=12, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_random_admissions_faults_and_restarts_never_double_allocate_or_lose_allocations = EmulatorWithPlugin.TestCase
