"""`cronos bench herd`: N jobs on one schedule, and how fast the cluster starts the herd at its tick.

    cronos bench herd --jobs 100000
    cronos bench herd --jobs 100000 --executors 1
    cronos bench herd --jobs 300 --schedule '*/10 * * * * *'

Starts `cronos api`, registers one job through `POST /api/jobs` (action `bench.count`, the no-op
that counts its executions and records when its code started: cronos.bench.counter) and N - 1
copies of it by COPY (cronos.bench.bulk: rows, revisions and audit entries as the store writes
them), then starts one `cronos dispatcher` and K executors (default 2) at their default settings (the
dispatcher logs at DEBUG: its tick-write lines), waits for the leader to load the N jobs and
for the next fire time of --schedule (default `* * * * *`: the next minute) at least --margin
seconds ahead. For that tick's herd it prints, relative to the tick: when the leader's tick
write finished (and how long it took), when the first and the last token went out, the claim
(the ledger's started_at) and the task start (when the task's code started)
first/median/p99/last, missed and duplicated runs (counter and ledger), and the CPU each role,
PostgreSQL's backends and redis-server used from 2 s before the tick to the last start.
Exits 1 when a run was missed or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg

from cronos.bench.bulk import Spec, copy_jobs
from cronos.bench.common import say, table
from cronos.bench.counter import executions_key, parse_field, started_key, started_ms
from cronos.bench.roles import Usage
from cronos.bench.scale import (
    ScaleBench,
    StagedRoles,
    Written,
    ms_summary,
    register,
    run_bench,
    wait_loaded,
    written,
)
from cronos.errors import InvalidSchedule
from cronos.keys import Keys
from cronos.messages import TOKEN_FIELD, decode_token
from cronos.schedule import parse_schedule
from cronos.settings import Settings

TARGET_LAST_S = 15.0  # issue 27: 100,000 jobs at * * * * * start within 15 s of the minute
# $1: the herd's tick. Its runs: state, claim (started_at) and ledger write (created_at) against the tick.
HERD_RUNS = """
SELECT job_id, state, extract(epoch FROM started_at - scheduled_for) * 1000 AS claimed_ms
FROM runs WHERE scheduled_for = $1 AND trigger = 'schedule'
"""
HERD_OPEN = "SELECT count(*) FROM runs WHERE scheduled_for = $1 AND state IN ('queued', 'waiting', 'running')"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench herd", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=100_000, help="jobs registered, all on --schedule")
    # Two on one machine: on 2 cores a 100,000-job herd's last start came at +12.6 s with two, +17.1 s with one.
    p.add_argument("--executors", type=int, default=2, help="executor processes")
    p.add_argument("--schedule", default="* * * * *", help="their cron expression (6 fields: seconds first)")
    p.add_argument("--margin", type=float, default=3.0, help="the herd's tick is at least this far after loading")
    p.add_argument("--settle", type=float, default=50.0, help="longest wait after the tick for the herd to finish")
    p.add_argument("--keep", action="store_true", help="keep the database, Redis keys and role logs")
    return p


@dataclass(frozen=True, slots=True)
class Herd:
    tick: datetime
    jobs: int
    starts_ms: list[float]  # task code start - tick, the first execution of each job's run
    claims_ms: list[float]  # the ledger's started_at - tick
    pushes_ms: list[float]  # stream entry time - tick, of the herd's tokens (read as they were added)
    missed_counter: int
    missed_ledger: int
    dup_counter: int
    dup_ledger: int
    states: dict[str, int]
    rounds: list[Written]  # the leader's tick-write rounds that wrote the herd

    @property
    def failed(self) -> bool:
        return bool(self.missed_counter or self.missed_ledger or self.dup_counter or self.dup_ledger)


def herd_rounds(rounds: Sequence[Written], tick: datetime, jobs: int, lookahead_s: float = 5.0) -> list[Written]:
    """The leader's rounds that wrote the herd: from `lookahead_s` before the tick, until they
    hold `jobs` queued runs (one round, unless a catch-up or the lookahead cut it)."""
    found, total = [], 0
    for entry in rounds:
        if entry.ts < tick - timedelta(seconds=lookahead_s):
            continue
        found.append(entry)
        total += entry.count
        if total >= jobs:
            break
    return found


def _s(ms: float) -> str:
    return f"{ms / 1000:+.2f} s"


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    return ", ".join(f"{name} {_s(value)}" for name, value in ms_summary(values).items())


def render(herd: Herd, cpu_s: dict[str, float | None], seconds: float, backends: int) -> str:
    rounds = herd.rounds
    write = "no tick-write line in the leader's log"
    if rounds:
        took = sum(r.duration_ms for r in rounds)
        write = (
            f"{_s((rounds[-1].ts - herd.tick).total_seconds() * 1000)}"
            f" ({sum(r.count for r in rounds):,} runs in {len(rounds)} round(s), {took:,.0f} ms writing)"
        )
    last = max(herd.starts_ms, default=0.0)
    verdict = "met" if herd.starts_ms and last <= TARGET_LAST_S * 1000 and not herd.failed else "MISSED"
    pushes = herd.pushes_ms
    summary = [
        ("herd tick", f"{herd.tick:%Y-%m-%d %H:%M:%S} UTC ({herd.jobs:,} jobs)"),
        ("tick write finished", write),
        ("tokens pushed", f"first {_s(min(pushes))}, last {_s(max(pushes))}" if pushes else "none seen"),
        ("claimed (started_at)", _spread(herd.claims_ms)),
        ("task start", _spread(herd.starts_ms)),
        ("target", f"last task start <= +{TARGET_LAST_S:g} s: {verdict}"),
        ("missed runs", f"{herd.missed_counter} (counter), {herd.missed_ledger} (ledger)"),
        ("duplicated runs", f"{herd.dup_counter} (counter), {herd.dup_ledger} (ledger)"),
        ("herd run states", ", ".join(f"{k} {v:,}" for k, v in sorted(herd.states.items())) or "none"),
    ]
    width = max(len(name) for name, _ in summary)
    lines = [f"  {name:<{width}}  {value}" for name, value in summary]
    rows = []
    for name, value in cpu_s.items():
        label = {"postgres": f"postgres ({backends} backends)", "redis": "redis-server"}.get(name, name)
        shown = ("n/a", "n/a") if value is None else (f"{value:.2f}", f"{100 * value / seconds:.0f}%")
        rows.append([label, *shown])
    head = f"  cpu from 2 s before the tick to the last start ({seconds:.1f} s):"
    return "\n".join([*lines, "", head, table(["process", "cpu s", "cpu"], rows)])


class HerdBench(ScaleBench):
    name = "herd"

    def __init__(self, settings: Settings, args: argparse.Namespace) -> None:
        super().__init__(settings, args)
        self.keys = Keys(self.scratch.prefix)

    async def measure(self, conn: asyncpg.Connection) -> int:
        args = self.args
        say(f"starting the api on {self.scratch.db_name} (logs {self.workdir})")
        async with aiohttp.ClientSession() as http:
            self.roles.start_api()
            await self.roles.wait_api(http)
            started = time.monotonic()
            template = await register(http, self.roles.base_url, "herd-0000000", args.schedule, {})
            specs: list[Spec] = [(f"herd-{i:07d}", args.schedule, {}) for i in range(1, args.jobs)]
            await copy_jobs(conn, template, specs)
            say(
                f"registered {args.jobs:,} jobs in {time.monotonic() - started:.1f} s (1 through POST /api/jobs,"
                f" {args.jobs - 1:,} copied from it by COPY); starting the dispatcher and {args.executors} executor(s)"
            )
            self.roles.start_rest(args.executors)
            await self.roles.wait_ready(http, conn, self.client)
        took = await wait_loaded(self.roles, args.jobs, timeout_s=120)
        say(f"the leader loaded {args.jobs:,} jobs ({took:.1f} s after the roles were ready)")
        schedule = parse_schedule(args.schedule)
        tick = schedule.next_after(datetime.now(UTC) + timedelta(seconds=args.margin))
        say(f"waiting for the herd at {tick:%H:%M:%S} UTC")
        usage = Usage(self.roles, conn, self.scratch.db_name, await _redis_pid(self.client))
        await _sleep_until(tick - timedelta(seconds=2), self.roles)
        pushes = _Pushes(self.client, self.keys.stream, int(tick.timestamp() * 1000))
        watching = asyncio.create_task(pushes.watch())
        await usage.open_window()
        opened = time.time()
        try:
            await self._wait_herd(conn, usage, tick)
            cpu_s = await usage.close_window()
            seconds = time.time() - opened
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        await pushes.read(block_ms=None)  # what came since the watcher's last read
        say("stopping the roles")
        self.roles.stop()
        herd = await self._judge(conn, tick, pushes.ms)
        print(f"\ncronos bench herd --jobs {args.jobs} --executors {args.executors} --schedule '{args.schedule}'"
              " (roles at their defaults; jobs registered by COPY from one created through the API)")  # fmt: skip
        print(render(herd, cpu_s, seconds, len(usage.backends)), flush=True)
        return 1 if herd.failed else 0

    async def _wait_herd(self, conn: asyncpg.Connection, usage: Usage, tick: datetime) -> None:
        """Until every job of the herd started (counted) and none of its runs is open, or --settle passes."""
        deadline = tick + timedelta(seconds=self.args.settle)
        shown = time.monotonic()
        counted, before = 0, int(await self.client.hlen(executions_key(self.scratch.prefix)))
        while datetime.now(UTC) < deadline:
            await asyncio.sleep(0.5)
            self.roles.check_alive()
            await usage.sample()
            counted = await self._counted(tick, before)
            if counted >= self.args.jobs and await conn.fetchval(HERD_OPEN, tick) == 0:
                return
            if time.monotonic() - shown >= 5:
                shown = time.monotonic()
                say(f"  +{(datetime.now(UTC) - tick).total_seconds():.0f} s: {counted:,} started")
        say(f"the herd did not finish within --settle {self.args.settle:g} s ({counted:,} started)")

    async def _counted(self, tick: datetime, before: int) -> int:
        """The herd's runs counted so far: the counter's growth since the window opened (`before`
        fields) while that is short of the herd and no later tick fired, else its fields of this tick."""
        if datetime.now(UTC) < parse_schedule(self.args.schedule).next_after(tick):
            grown = int(await self.client.hlen(executions_key(self.scratch.prefix))) - before
            if grown < self.args.jobs:
                return grown
        fields = await self.client.hkeys(executions_key(self.scratch.prefix))
        tick_ms = int(tick.timestamp() * 1000)
        return sum(1 for f in fields if parse_field(f)[1] == tick_ms)

    async def _judge(self, conn: asyncpg.Connection, tick: datetime, pushes_ms: list[float]) -> Herd:
        tick_ms = int(tick.timestamp() * 1000)
        prefix = self.scratch.prefix
        counts: Counter[int] = Counter()
        for field, value in (await self.client.hgetall(executions_key(prefix))).items():
            job_id, ms, _attempt = parse_field(field)
            if ms == tick_ms:
                counts[job_id] += int(value)
        starts = []
        for field, value in (await self.client.hgetall(started_key(prefix))).items():
            _job_id, ms, attempt = parse_field(field)
            if ms == tick_ms and attempt == 1:
                starts.append(started_ms(value) - tick_ms)
        rows = await conn.fetch(HERD_RUNS, tick)
        completed = Counter(r["job_id"] for r in rows if r["state"] == "completed")
        jobs = self.args.jobs
        return Herd(
            tick=tick,
            jobs=jobs,
            starts_ms=starts,
            claims_ms=[float(r["claimed_ms"]) for r in rows if r["claimed_ms"] is not None],
            pushes_ms=pushes_ms,
            missed_counter=jobs - len(counts),
            missed_ledger=jobs - len(completed),
            dup_counter=sum(1 for n in counts.values() if n > 1),
            dup_ledger=sum(1 for n in completed.values() if n > 1),
            states=dict(Counter(r["state"] for r in rows)),
            rounds=herd_rounds(written(self.roles.log_of("dispatcher")), tick, jobs),
        )


@dataclass
class _Pushes:
    """When each of the herd's tokens went out (its stream entry id's ms, less the tick), read as
    they are added: a plain XREAD beside the group, which it does not disturb. Read after the herd
    ran, entries could be gone: the housekeeping trims acknowledged ones every few seconds."""

    client: Any
    stream: str
    tick_ms: int
    ms: list[float] = dataclass_field(default_factory=list)
    read_to: str | None = None  # the last entry id read (from 10 s before the tick at first)

    async def watch(self) -> None:
        while True:
            await self.read(block_ms=500)

    async def read(self, block_ms: int | None) -> None:
        """What was added since the last read (waiting up to `block_ms` for something)."""
        while True:
            start = self.read_to or f"{self.tick_ms - 10_000}-0"
            replies = await self.client.xread({self.stream: start}, count=10_000, block=block_ms)
            entries = replies[0][1] if replies else []
            for entry_id, fields in entries:
                if decode_token(fields[TOKEN_FIELD]).scheduled_for_ms == self.tick_ms:
                    self.ms.append(float(entry_id.split(b"-")[0]) - self.tick_ms)
            if entries:
                self.read_to = entries[-1][0].decode()
            if len(entries) < 10_000:
                return


async def _redis_pid(client: Any) -> int | None:
    info = await client.info("server")
    return int(info["process_id"]) if "process_id" in info else None


async def _sleep_until(when: datetime, roles: StagedRoles) -> None:
    while (left := (when - datetime.now(UTC)).total_seconds()) > 0:
        roles.check_alive()
        await asyncio.sleep(min(left, 1.0))


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.jobs < 1 or args.executors < 1 or args.settle <= 0 or args.margin < 0:
        print("cronos bench herd: --jobs and --executors must be >= 1, --settle > 0, --margin >= 0", file=sys.stderr)
        return 2
    try:
        parse_schedule(args.schedule)
    except InvalidSchedule as exc:
        print(f"cronos bench herd: --schedule: {exc}", file=sys.stderr)
        return 2
    return run_bench(HerdBench(settings, args))
