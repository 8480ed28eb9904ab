"""The benchmarks' task: a no-op that counts its own executions in Redis.

Executors load it with `--import cronos.bench.counter`. Each execution adds 1 to the field
`<job_id>:<scheduled_for_ms>:<attempt>` (a run's identity) of one hash, so a benchmark sees
real executions, not ledger rows: a field above 1 ran twice, a missing one never ran. The same
field of a second hash keeps the wall-clock ms at which the run's first execution entered the
task: its task code start (the start delay, as the user's code sees it).
Concurrent executions share one Redis call (a batch per round trip), so counting does not
cost the executor a round trip per run.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.exceptions import RedisError

import cronos
from cronos.errors import CronosError
from cronos.redis_client import connect
from cronos.settings import load_settings

COUNTER_TASK = "bench.count"
# KEYS[1]: the counts, KEYS[2]: the start times; ARGV: field, start ms, field, ... One call per batch.
_COUNT_SCRIPT = (
    "for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], 1);"
    " redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) end return #ARGV / 2"
)


def executions_key(prefix: str) -> str:
    return f"{prefix}bench:executions"


def started_key(prefix: str) -> str:
    return f"{prefix}bench:started"


def execution_field(job_id: int, scheduled_for_ms: int, attempt: int) -> str:
    return f"{job_id}:{scheduled_for_ms}:{attempt}"


def parse_field(field: bytes | str) -> tuple[int, int, int]:
    """(job_id, scheduled_for_ms, attempt) of a counter field."""
    text = field.decode() if isinstance(field, bytes) else field
    job_id, ms, attempt = text.split(":")
    return int(job_id), int(ms), int(attempt)


class _Counts:
    """Group commit: the first caller flushes; whoever arrives during a flush goes in the next batch."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._script = client.register_script(_COUNT_SCRIPT)
        self._keys = [executions_key(prefix), started_key(prefix)]
        self._pending: list[tuple[str, int, asyncio.Future[None]]] = []
        self._flushing = False

    async def add(self, field: str, started_ms: int) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((field, started_ms, done))
        if not self._flushing:
            self._flushing = True
            try:
                await asyncio.sleep(0)  # executions woken in the same loop pass join this batch
                while self._pending:
                    batch, self._pending = self._pending, []
                    await self._flush(batch)
            finally:
                self._flushing = False
                for _field, _ms, left in self._pending:  # only after a cancelled flush
                    if not left.done():
                        left.set_exception(RuntimeError("execution counter flush was cancelled"))
                self._pending = []
        await done

    async def _flush(self, batch: list[tuple[str, int, asyncio.Future[None]]]) -> None:
        try:
            await self._script(keys=self._keys, args=[x for field, ms, _ in batch for x in (field, ms)])
        except asyncio.CancelledError:
            for _field, _ms, waiter in batch:
                waiter.cancel()
            raise
        except (CronosError, RedisError) as exc:  # each execution in the batch fails with it
            for _field, _ms, waiter in batch:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for _field, _ms, waiter in batch:
            if not waiter.done():
                waiter.set_result(None)


_counts: _Counts | None = None


@cronos.task(COUNTER_TASK, replace=True)
async def count_execution(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    global _counts
    started_ms = int(time.time() * 1000)  # first: the user's code starts here
    if _counts is None:
        own = load_settings()  # the executor process's own settings (its prefix and Redis)
        _counts = _Counts(connect(own.redis_url), own.key_prefix)
    ms = int(ctx.scheduled_for.timestamp() * 1000)
    await _counts.add(execution_field(ctx.job_id, ms, ctx.attempt), started_ms)
