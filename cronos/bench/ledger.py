"""`cronos bench ledger`: what recording every run costs PostgreSQL, with nothing else around it.

    cronos bench ledger --jobs 1000 --rounds 30

The floor under the CPU a run costs end to end: every run of Cronos is a row that the leader
writes (the tick write, moving its job's cursor), an executor claims and an executor finishes
(G1, G2: the ledger is written before a token is pushed and holds every outcome). This sends
those three writes for N every-second jobs, R ticks in a row, through the store's own calls
(`Ledger.write_ticks`, `RunStore.claim`, `RunStore.finish`) on one connection, batched as the
roles batch them (a tick's runs in one write; claims and finishes --batch at a time, the
executor's CLAIM_BATCH), with no Redis, no role process and no task. It prints, per phase and in
all, the CPU per run of the connection's PostgreSQL backend (from /proc, as `bench e2e` counts
the database's backends), of this process (the store's Python and asyncpg) and the wall time of
a tick's statements.

An end-to-end run costs at least the backend's figure: compare it with `cronos bench
apscheduler`'s CPU per run measured in the same sitting (an in-process scheduler that keeps
nothing). Runs in a database of its own on settings.database_url's server, dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import asyncpg

from cronos import lifecycle
from cronos.bench.common import Scratch, every_second_jobs, pct, proc_cpu_s, proc_name, say, scratch_database, table
from cronos.settings import Settings
from cronos.store.db import connect
from cronos.store.epoch import EpochStore
from cronos.store.ledger import Ledger
from cronos.store.runs import Claim, ClaimedRun, Outcome, RunStore

NODE_ID = "bench-ledger"
LEASE_S = 30.0
PHASES = ("tick write", "claim", "finish")
T = TypeVar("T")
Item = TypeVar("Item")
Answer = TypeVar("Answer")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench ledger", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=1000, help="every-second jobs: the runs of one tick")
    p.add_argument("--rounds", type=int, default=30, help="ticks written, claimed and finished, one after another")
    p.add_argument("--batch", type=int, default=500, help="runs a claim or finish statement (executor CLAIM_BATCH)")
    p.add_argument("--keep", action="store_true", help="keep the scratch database")
    return p


@dataclass
class Phase:
    """One phase's cost over every round: CPU seconds of the backend and of this process, walls."""

    backend_s: float = 0.0
    client_s: float = 0.0
    walls_ms: list[float] = field(default_factory=list)


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.jobs < 1 or args.rounds < 1 or args.batch < 1:
        print("cronos bench ledger: --jobs, --rounds and --batch must be at least 1")
        return 2
    return asyncio.run(_bench(settings, args))


async def _bench(settings: Settings, args: argparse.Namespace) -> int:
    scratch = Scratch.new(settings.database_url)
    async with scratch_database(scratch, keep=args.keep) as dsn:
        print(f"cronos bench ledger: {args.jobs:,} every-second jobs, {args.rounds} ticks, on {scratch.db_name} ")
        pool = await connect(dsn, min_size=1, max_size=1)  # one connection: one backend to read
        try:
            return await _measure(pool, args)
        finally:
            await pool.close()


async def _measure(pool: asyncpg.Pool, args: argparse.Namespace) -> int:
    backend = await pool.fetchval("SELECT pg_backend_pid()")
    if proc_name(backend) != "postgres":
        print("cronos bench ledger: PostgreSQL's backend is not a local process: its CPU cannot be read")
        return 2
    job_ids = await every_second_jobs(pool, args.jobs, "ledger-")
    await pool.execute("ANALYZE jobs")
    epoch = (await EpochStore(pool).take(NODE_ID)).epoch
    ledger, runs = Ledger(pool), RunStore(pool)
    phases = {name: Phase() for name in PHASES}
    wrong: list[str] = []
    say(f"{args.jobs:,} jobs registered; {args.rounds} ticks, each a whole second at least 2 s ahead")
    tick = datetime.fromtimestamp(0, UTC)
    for r in range(args.rounds):
        # Ahead of the clock, as the leader writes them: no claim finds its run past the grace.
        tick = max(tick + timedelta(seconds=1), datetime.fromtimestamp(int(time.time()) + 2, UTC))
        ticks, n = [tick] * len(job_ids), len(job_ids)
        written = await _timed(
            phases["tick write"],
            backend,
            ledger.write_ticks(
                epoch, job_ids, ticks, ticks, [None] * n, [1] * n, expires_at=[lifecycle.expiry(tick, 60)] * n
            ),
        )
        ids = [queued.id for queued in written.queued]
        claim = functools.partial(_claim, runs, int(tick.timestamp() * 1000))
        claimed = await _timed(phases["claim"], backend, _batched(ids, args.batch, claim))
        outcomes = [
            Outcome(run_id=i, node_id=NODE_ID, state="completed", duration_ms=0.1, scheduled_for=tick) for i in ids
        ]
        finished = await _timed(
            phases["finish"], backend, _batched(outcomes, args.batch, functools.partial(_finish, runs))
        )
        started = sum(1 for c in claimed if isinstance(c, ClaimedRun))
        done = sum(finished)
        if not len(ids) == started == done == len(job_ids):
            wrong.append(f"tick {tick:%H:%M:%S}: {len(ids)} written, {started} claimed, {done} finished")
        if (r + 1) % 10 == 0 or r + 1 == args.rounds:
            say(f"{r + 1} of {args.rounds} ticks")
    _report(phases, args.jobs * args.rounds)
    for line in wrong:
        print(f"  !! {line}")
    return 1 if wrong else 0


async def _timed(phase: Phase, backend: int, call: Awaitable[T]) -> T:
    """`call`'s answer; its CPU (the backend's, this process's) and wall time go to `phase`."""
    backend_before, client_before, wall_before = proc_cpu_s(backend) or 0.0, time.process_time(), time.perf_counter()
    result = await call
    phase.walls_ms.append((time.perf_counter() - wall_before) * 1000)
    phase.client_s += time.process_time() - client_before
    phase.backend_s += (proc_cpu_s(backend) or 0.0) - backend_before
    return result


async def _batched(
    items: Sequence[Item], size: int, call: Callable[[list[Item]], Awaitable[list[Answer]]]
) -> list[Answer]:
    """`call` on `size` items at a time, back to back (as the executor's batchers send them)."""
    answers: list[Answer] = []
    for start in range(0, len(items), size):
        answers += await call(list(items[start : start + size]))
    return answers


async def _claim(runs: RunStore, tick_ms: int, ids: list[int]) -> list[Claim]:
    return await runs.claim(ids, NODE_ID, LEASE_S, [tick_ms] * len(ids))


async def _finish(runs: RunStore, outcomes: list[Outcome]) -> list[bool]:
    written = (await runs.finish(outcomes)).written
    return [o.run_id in written for o in outcomes]


def _report(phases: dict[str, Phase], n_runs: int) -> None:
    rows = []
    for name, phase in phases.items():
        rows.append(
            (
                name,
                f"{phase.backend_s / n_runs * 1000:.3f}",
                f"{phase.client_s / n_runs * 1000:.3f}",
                f"{pct(phase.walls_ms, 0.5):.1f}",
                f"{pct(phase.walls_ms, 0.99):.1f}",
            )
        )
    backend = sum(p.backend_s for p in phases.values())
    client = sum(p.client_s for p in phases.values())
    rows.append(("all", f"{backend / n_runs * 1000:.3f}", f"{client / n_runs * 1000:.3f}", "", ""))
    print()
    print(table(("phase", "postgres ms/run", "this process ms/run", "tick wall p50 ms", "p99 ms"), rows))
    print(f"runs recorded       {n_runs:,}")
    if backend > 0:
        print(f"postgres alone      {1 / (backend / n_runs):,.0f} runs a second of one core")
