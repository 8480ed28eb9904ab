"""The queues jobs name: what the leader keeps (cronos.stream drops the others' empty streams, and
the orphaned ones whatever they hold) and the cap on their number that a job write checks (issue 22:
1,000 queues left behind by deleted jobs cost the leader a quarter of a core, /api/cluster 450 ms
and /metrics 3,000 series). A queue with a stream counts toward the cap until it is dropped."""

from __future__ import annotations

from collections.abc import Collection

import asyncpg

from cronos.errors import InvalidInput
from cronos.models import DEFAULT_QUEUE
from cronos.store.db import translate_errors
from cronos.store.queries import jobs as jobs_q


def over_cap(queue: str, named: Collection[str], leaving: str | None, cap: int) -> bool:
    """Whether a job naming `queue` (and no longer `leaving`, a queue it alone named) takes the
    number of queues past `cap`. A queue already named, or the default one, never does."""
    if queue in named or queue == DEFAULT_QUEUE:
        return False
    after = {*named, DEFAULT_QUEUE} - ({leaving} if leaving is not None else set())
    return len(after) + 1 > cap


def orphaned(queue: str, named: Collection[str], served: Collection[str]) -> bool:
    """A queue whose stream's entries nobody will read: no job names it and no live executor reads
    it (a deleted job's token left on a queue whose pool is gone). Such entries are only a copy: a
    run of a job that still exists is pushed again to its job's queue by the leader's watchdog."""
    return queue != DEFAULT_QUEUE and queue not in named and queue not in served


class QueueStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def named(self) -> set[str]:
        """The queues jobs name (any status: a paused job keeps its queue)."""
        with translate_errors():
            return {r["queue"] for r in await self._pool.fetch(jobs_q.QUEUES_NAMED)}

    async def check_cap(self, queue: str, job_id: int | None, cap: int, listed: Collection[str] = ()) -> None:
        """InvalidInput ($.queue) when job `job_id` (None: a new job) naming `queue` would make more
        than `cap` queues, counting those jobs name and those with a stream (`listed`: an orphaned
        one is a stream the leader tends until it drops it). Checked before the write: two writes at
        once may each add one."""
        with translate_errors():
            named = {r["queue"] for r in await self._pool.fetch(jobs_q.QUEUES_NAMED)} | set(listed)
            leaving = None if job_id is None else await self._pool.fetchval(jobs_q.QUEUE_NAMED_ONLY_BY, job_id)
        if over_cap(queue, named, leaving, cap):
            raise InvalidInput(
                "$.queue",
                f"a new queue would make more than {cap} (CRONOS_MAX_QUEUES): name one of the existing queues",
            )
