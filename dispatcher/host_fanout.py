"""Runs on every host, the leader's side: which hosts get a run of each per-host tick of a batch.

The choice is cronos.every_host's (pure); this reads the live executors from presence once per
round that holds a per-host tick (never for a round without one: ordinary jobs pay nothing) and
applies it to a batch before it is written: a tick no live executor can take is recorded skipped
"no_host" (G2), the others get a run per host in the same fenced transaction (Ledger.write_ticks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from cronos import presence
from cronos.every_host import SKIP_NO_HOST, SKIP_PER_HOST, Host, choose, hosts_of
from cronos.models import DEFAULT_QUEUE
from dispatcher.planner import TickBatch


def plan_hosts(batch: TickBatch, hosts: list[Host]) -> dict[int, list[str]]:
    """Each per-host job's hosts for this batch; the ticks of those with none become "no_host"."""
    chosen = {
        job_id: choose(
            spec,
            job_id,
            presence.Needs(batch.queues.get(job_id, DEFAULT_QUEUE), batch.actions.get(job_id), job_id in batch.shells),
            hosts,
        )
        for job_id, spec in batch.per_host.items()
    }
    for index, job_id in enumerate(batch.job_ids):
        if batch.skip_reason[index] == SKIP_PER_HOST and not chosen.get(job_id):
            batch.skip_reason[index] = SKIP_NO_HOST
    return {job_id: found for job_id, found in chosen.items() if found}


class HostRoster:
    """The live executors, read from presence at most once per round (`now`)."""

    def __init__(self, read: Callable[[], Awaitable[list[dict[str, str]]]]) -> None:
        self._read = read
        self._round: datetime | None = None
        self._hosts: list[Host] = []

    async def hosts(self, now: datetime) -> list[Host]:
        if self._round != now:
            self._hosts = hosts_of(await self._read())
            self._round = now
        return self._hosts

    async def fan_out(self, batch: TickBatch, now: datetime) -> Mapping[int, list[str]] | None:
        """`plan_hosts` for a batch holding per-host ticks; None (nothing read) for any other."""
        if not batch.per_host:
            return None
        return plan_hosts(batch, await self.hosts(now))
