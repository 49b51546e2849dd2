"""Leader election I/O: acquire, renew and release a ``coordination.k8s.io/v1`` Lease.

Owns :class:`LeaderElector`: every ``retryPeriod`` (jittered as client-go
jitters it) read the Lease, decide with :func:`election.next_record`, and
write with the read ``resourceVersion`` so that two candidates racing for it
cannot both win (the loser gets 409 Conflict). While leading it renews every
``retryPeriod``; when no renewal has succeeded for ``renewDeadline`` it stops
leading (``leading`` clears at once, so binding stops before the lease can
expire for others). On shutdown it releases the lease (holder emptied) so a
standby takes over at once. Must not schedule.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from kubegpu.scheduling.live import election
from kubegpu.scheduling.live.apiwrites import micro_now
from kubegpu.scheduling.live.config import LeaderElection

log = logging.getLogger(__name__)
JITTER = 1.2


class LeaderElector:
    """One candidate for one Lease."""

    def __init__(
        self,
        client: AsyncClient,
        settings: LeaderElection,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.identity = identity
        self.clock = clock
        self.leadership = election.Leadership(settings.renew_deadline)
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0

    def may_act(self) -> bool:
        """True while this candidate leads and its last renewal is younger than the renew deadline."""
        return self.leading.is_set() and self.leadership.may_act(self.clock())

    async def _try(self) -> bool:
        now = self.clock()
        name, namespace = self.settings.resource_name, self.settings.resource_namespace
        try:
            lease = await self.client.get(Lease, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            wall = micro_now()
            spec = LeaseSpec(
                holderIdentity=self.identity,
                leaseDurationSeconds=round(self.settings.lease_duration),
                acquireTime=wall,
                renewTime=wall,
                leaseTransitions=0,
            )
            try:
                await self.client.create(Lease(metadata=ObjectMeta(name=name, namespace=namespace), spec=spec))
            except ApiError as create_exc:
                if create_exc.status.code in (409,):
                    return False
                raise
            return True
        spec = lease.spec or LeaseSpec()
        seen = (spec.holderIdentity or "", str(spec.renewTime))
        if seen != self._observed:
            self._observed, self._observed_at = seen, now
        current = election.LeaseRecord(
            spec.holderIdentity or "", spec.leaseDurationSeconds or 15, None, None, spec.leaseTransitions or 0
        )
        record = election.next_record(current, self._observed_at, now, self.identity, self.settings.lease_duration)
        if record is None:
            return False
        wall = micro_now()
        taking_over = current.holder != self.identity
        lease.spec = LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=record.lease_duration_s,
            acquireTime=wall if taking_over else spec.acquireTime,
            renewTime=wall,
            leaseTransitions=record.transitions,
        )
        try:
            await self.client.replace(lease)
        except ApiError as exc:
            if exc.status.code == 409:
                return False  # someone wrote it since we read it
            raise
        self._observed, self._observed_at = (self.identity, str(wall)), now
        return True

    async def _attempt(self) -> bool:
        try:
            return await self._try()
        except (ApiError, httpx2.HTTPError, OSError) as exc:
            log.warning("lease update failed", extra={"lease": self.settings.resource_name, "error": repr(exc)})
            return False

    async def _sleep(self) -> None:
        await asyncio.sleep(self.settings.retry_period * (1 + random.random() * (JITTER - 1)))

    async def run(self) -> None:
        """Acquire, then renew until a renewal deadline is missed; sets ``lost`` then and returns."""
        while not await self._attempt():
            await self._sleep()
        self.leadership.renewed(self.clock())
        self.leading.set()
        log.info("leader election won", extra={"lease": self.settings.resource_name, "identity": self.identity})
        while True:
            await asyncio.sleep(self.settings.retry_period)
            if await self._attempt():
                self.leadership.renewed(self.clock())
                continue
            if not self.leadership.may_act(self.clock()):
                self.leading.clear()
                self.leadership.lost()
                self.lost.set()
                log.error("leader election lost", extra={"lease": self.settings.resource_name})
                return

    async def release(self) -> None:
        """Give the lease up (holder emptied) if this candidate holds it; errors are only logged."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        try:
            lease = await self.client.get(
                Lease, self.settings.resource_name, namespace=self.settings.resource_namespace
            )
            if lease.spec is None or lease.spec.holderIdentity != self.identity:
                return
            wall = micro_now()
            lease.spec = LeaseSpec(
                holderIdentity=None,
                leaseDurationSeconds=1,
                acquireTime=wall,
                renewTime=wall,
                leaseTransitions=lease.spec.leaseTransitions,
            )
            await self.client.replace(lease)
        except (ApiError, httpx2.HTTPError, OSError) as exc:
            log.warning("lease release failed", extra={"error": repr(exc)})
