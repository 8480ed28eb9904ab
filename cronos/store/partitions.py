"""The leader's side of bounded history: the partitions of `runs` (one per UTC day, migration
0009), created ahead and dropped past retention, each change fenced by the leader's epoch.

Each day of `runs` has its day of `run_output` (migration 0042) and of `run_usage` (migration
0046), named alike (`output_partition`, `usage_partition`): created and dropped in the same
transaction, so a run's output and usage go with it.

DDL takes locks the hot path may queue behind, so each statement waits at most
PARTITION_LOCK_TIMEOUT for them and the change is left to the next pass when it cannot have
them (`Change.BUSY`): a maintenance pass never stalls claims for longer than that.
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum

import asyncpg
import msgspec

from cronos.store.db import to_struct, translate_errors
from cronos.store.epoch import fenced
from cronos.store.queries import output as output_q
from cronos.store.queries import runs as runs_q
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.queries import usage as usage_q

log = logging.getLogger("cronos.store.partitions")


def output_partition(name: str) -> str:
    """The partition of run_output that goes with partition `name` of runs. Pure."""
    return "run_output" + name.removeprefix("runs")


def usage_partition(name: str) -> str:
    """The partition of run_usage that goes with partition `name` of runs. Pure."""
    return "run_usage" + name.removeprefix("runs")


class Partition(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    is_default: bool
    lower: datetime | None  # None: from the beginning (MINVALUE), or the default partition
    upper: datetime | None  # None: the default partition


class Change(StrEnum):
    """What became of one partition change: expected outcomes, as values."""

    DONE = "done"
    BUSY = "busy"  # a lock was not granted within the timeout: try again next pass
    IN_USE = "in_use"  # still holds a queued or running run: kept


class _InUse(Exception):
    """Rolls back a detach that found a queued or running run after all."""


class PartitionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list(self) -> list[Partition]:
        with translate_errors():
            rows = await self._pool.fetch(upkeep_q.PARTITIONS)
        return [to_struct(r, Partition) for r in rows]

    async def create(self, epoch: int, name: str, lower: datetime, upper: datetime) -> tuple[Change, int]:
        """Create partition `name` for [lower, upper), taking over the rows of that range the
        default partition holds; returns the outcome and how many rows moved."""
        try:
            async with fenced(self._pool, epoch) as conn:
                await conn.execute(upkeep_q.PARTITION_LOCK_TIMEOUT)
                await conn.execute(upkeep_q.PARTITION_BUILD.format(name=name))
                status = await conn.execute(upkeep_q.PARTITION_TAKE_DEFAULT.format(name=name), lower, upper)
                await conn.execute(
                    upkeep_q.PARTITION_ATTACH.format(name=name, lower=lower.isoformat(), upper=upper.isoformat())
                )
                moved = int(status.split()[-1])
                if moved:
                    await conn.execute(upkeep_q.PARTITION_RUNNING_EXCLUSIVE.format(name=name))
                output = output_partition(name)
                await conn.execute(output_q.OUTPUT_PARTITION_BUILD.format(name=output))
                await conn.execute(output_q.OUTPUT_PARTITION_TAKE_DEFAULT.format(name=output), lower, upper)
                await conn.execute(
                    output_q.OUTPUT_PARTITION_ATTACH.format(
                        name=output, lower=lower.isoformat(), upper=upper.isoformat()
                    )
                )
                usage = usage_partition(name)
                await conn.execute(usage_q.USAGE_PARTITION_BUILD.format(name=usage))
                await conn.execute(usage_q.USAGE_PARTITION_TAKE_DEFAULT.format(name=usage), lower, upper)
                await conn.execute(
                    usage_q.USAGE_PARTITION_ATTACH.format(name=usage, lower=lower.isoformat(), upper=upper.isoformat())
                )
        except asyncpg.LockNotAvailableError:
            return Change.BUSY, 0
        return Change.DONE, moved

    async def drop(self, epoch: int, name: str) -> Change:
        """Drop partition `name` unless it holds a queued or running run."""
        with translate_errors():
            if await self._pool.fetchval(upkeep_q.PARTITION_BUSY.format(name=name)):
                return Change.IN_USE  # checked first without a lock, to take none in vain
        try:
            async with fenced(self._pool, epoch) as conn:
                await conn.execute(upkeep_q.PARTITION_LOCK_TIMEOUT)
                await conn.execute(upkeep_q.PARTITION_DETACH.format(name=name))
                # Again under the detach's exclusive lock: nothing can have changed since.
                if await conn.fetchval(upkeep_q.PARTITION_BUSY.format(name=name)):
                    raise _InUse
                await conn.execute(upkeep_q.PARTITION_DROP.format(name=name))
                await conn.execute(output_q.OUTPUT_PARTITION_DROP.format(name=output_partition(name)))
                await conn.execute(usage_q.USAGE_PARTITION_DROP.format(name=usage_partition(name)))
        except _InUse:
            return Change.IN_USE
        except asyncpg.LockNotAvailableError:
            return Change.BUSY
        return Change.DONE

    async def purge_default(self, epoch: int, before: datetime, limit: int = 10_000) -> int:
        """Delete up to `limit` finished runs older than `before` from the default partition, and the
        inputs of manual runs past it (run_inputs: they outlive the days that drop), and the output
        and usage of the runs gone."""
        async with fenced(self._pool, epoch) as conn:
            status = await conn.execute(upkeep_q.DEFAULT_PURGE, before, limit)
            await conn.execute(runs_q.RUN_INPUTS_PURGE, before, limit)
            await conn.execute(output_q.OUTPUT_DEFAULT_PURGE, before, limit * 10)
            await conn.execute(usage_q.USAGE_DEFAULT_PURGE, before, limit)
        return int(status.split()[-1])
