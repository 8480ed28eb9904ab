"""The benchmarks' task: a no-op (or a CPU burner) that counts its own executions in Redis.

Executors load it with `--import cronos.bench.counter`. Each execution adds 1 to the field
`<job_id>:<scheduled_for_ms>:<attempt>` (a run's identity) of one hash, so a benchmark sees
real executions, not ledger rows: a field above 1 ran twice, a missing one never ran. The same
field of a second hash keeps the wall-clock time (epoch microseconds, the clock the ticks are
whole seconds of) at which the run's first execution ran the task's first statement: its start
at the task (minus the tick: the start delay as the user's code sees it).
A payload's `cpu_ms` makes the task busy for that much of its thread's CPU time before it
counts (`--task cpu:4ms`): on the executor's loop, as an async function doing CPU work would.
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
# KEYS[1]: the counts, KEYS[2]: the start times; ARGV: field, start us, field, ... One call per batch.
_COUNT_SCRIPT = (
    "for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], 1);"
    " redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) end return #ARGV / 2"
)


def executions_key(prefix: str) -> str:
    return f"{prefix}bench:executions"


def started_key(prefix: str) -> str:
    return f"{prefix}bench:started"


def started_ms(value: bytes | str) -> float:
    """A start recorded in `started_key` (microseconds of the wall clock), in milliseconds."""
    return int(value) / 1000


def execution_field(job_id: int, scheduled_for_ms: int, attempt: int) -> str:
    return f"{job_id}:{scheduled_for_ms}:{attempt}"


def task_payload(spec: str) -> dict[str, Any]:
    """The benchmark jobs' payload for `--task`: `noop`, or `cpu:<N>ms` (N ms of CPU per run)."""
    if spec == "noop":
        return {"action": COUNTER_TASK}
    kind, _, amount = spec.partition(":")
    try:
        cpu_ms = float(amount.removesuffix("ms")) if kind == "cpu" and amount.endswith("ms") else -1.0
    except ValueError:
        cpu_ms = -1.0
    if not 0 < cpu_ms <= 10_000:
        raise ValueError(f"--task {spec!r}: expected noop or cpu:<N>ms (0 < N <= 10000), e.g. cpu:4ms")
    return {"action": COUNTER_TASK, "cpu_ms": cpu_ms}


def spin_cpu(ms: float) -> None:
    """Busy for `ms` of this thread's CPU time: not wall time, so a spin preempted by the OS runs on."""
    until = time.thread_time() + ms / 1000
    while time.thread_time() < until:
        pass


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

    async def add(self, field: str, started_us: int) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((field, started_us, done))
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
    started_us = time.time_ns() // 1000  # the first statement: the user's code starts here (wall clock)
    cpu_ms = payload.get("cpu_ms")
    if cpu_ms:
        spin_cpu(float(cpu_ms))
    if _counts is None:
        own = load_settings()  # the executor process's own settings (its prefix and Redis)
        _counts = _Counts(connect(own.redis_url), own.key_prefix)
    ms = round(ctx.scheduled_for.timestamp() * 1000)
    await _counts.add(execution_field(ctx.job_id, ms, ctx.attempt), started_us)
