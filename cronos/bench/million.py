"""`cronos bench million`: a million registered jobs: the leader's memory and tick writes, the API's pages.

    cronos bench million --jobs 1000000
    cronos bench million --jobs 5000 --window 10 --requests 5

Registers N jobs (one through `POST /api/jobs`, the others copied from it by COPY:
cronos.bench.bulk) on this mix, each at a random instant (seconds-first expressions, so that the
ticks spread over every second instead of all landing at :00):

    70 % hourly          `S M * * * *`     at a random minute and second
    25 % daily           `S M H * * *`     at a random time of day
     5 % every minute    `S * * * * *`     at a random second

(about 1,030 runs a second for a million jobs), each labelled `team` (one of 20), `env` (prod or
staging) and `batch` (its thousandth of the registration). Then starts one dispatcher and K
executors at their default settings (the dispatcher logs at DEBUG: its tick-write lines), waits
for the leader to load every job and prints its RSS (and peak), then (after --warmup seconds: the
leader's catch-up of the ticks due since the registration, printed apart, and until the executors
have worked it off: no queued run more than 1 s overdue) over --window seconds each
tick-write round's duration p50/p99/max, then --requests sequential requests of each of:
`GET /api/jobs` (the first page, a page deep: the cursor after job N/2, a label selector) and the
console's jobs page (`GET /api/jobs/overview` first page, a name search that matches one job, a
label selector, and the page's `GET /api/jobs/health?ids=`): p50/p99/max each, against the
targets (RSS < 1 GB, tick write < 100 ms, each page < 50 ms). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import aiohttp
import asyncpg
import msgspec

from cronos.bench.bulk import Spec, copy_jobs
from cronos.bench.common import pct, proc_peak_rss, say
from cronos.bench.scale import ScaleBench, StagedRoles, proc_rss, register, run_bench, wait_loaded, written
from cronos.settings import Settings

TARGET_RSS = 2**30  # issue 27: the leader under 1 GB with a million jobs
TARGET_WRITE_MS = 100.0
TARGET_PAGE_MS = 50.0
TEAMS = 20


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronos bench million", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=1_000_000, help="jobs registered (the mix above)")
    p.add_argument("--executors", type=int, default=1, help="executor processes")
    p.add_argument("--window", type=float, default=120.0, help="seconds of tick writes measured")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds after the load before the window (the catch-up)")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=300.0,
        help="seconds the executors have, after --warmup, to work off the catch-up before the window",
    )
    p.add_argument("--requests", type=int, default=50, help="requests of each kind timed")
    p.add_argument("--seed", type=int, default=27, help="the mix's random seed")
    p.add_argument("--keep", action="store_true", help="keep the database, Redis keys and role logs")
    return p


def mix(count: int, seed: int) -> list[Spec]:
    """`count` jobs on the mix above: (name, expression, labels), the same for the same seed."""
    rng = random.Random(seed)
    specs: list[Spec] = []
    for i in range(count):
        draw, second, minute = rng.random(), rng.randrange(60), rng.randrange(60)
        if draw < 0.70:
            kind, expression = "hourly", f"{second} {minute} * * * *"
        elif draw < 0.95:
            kind, expression = "daily", f"{second} {minute} {rng.randrange(24)} * * *"
        else:
            kind, expression = "minutely", f"{second} * * * * *"
        labels = {"team": f"team-{i % TEAMS:02d}", "env": "prod" if i % 3 else "staging", "batch": f"b{i // 1000:04d}"}
        specs.append((f"m-{i:07d}-{kind}", expression, labels))
    return specs


@dataclass(frozen=True, slots=True)
class Timing:
    name: str
    ms: list[float]
    status: int  # the last response's status
    items: int  # the last response's items


class MillionBench(ScaleBench):
    name = "million"

    async def measure(self, conn: asyncpg.Connection) -> int:
        args = self.args
        specs = mix(args.jobs, args.seed)
        say(f"starting the api on {self.scratch.db_name} (logs {self.workdir})")
        async with aiohttp.ClientSession() as http:
            self.roles.start_api()
            await self.roles.wait_api(http)
            started = time.monotonic()
            template = await register(http, self.roles.base_url, *specs[0])
            await copy_jobs(conn, template, specs[1:])
            say(f"registered {args.jobs:,} jobs in {time.monotonic() - started:.1f} s; starting the dispatcher")
            self.roles.start_rest(args.executors)
            await self.roles.wait_ready(http, conn, self.client)
            loaded_s = await wait_loaded(self.roles, args.jobs, timeout_s=600)
            leader = next(r.proc.pid for r in self.roles.roles if r.name == "dispatcher")
            rss, peak = proc_rss(leader), proc_peak_rss(leader)
            say(f"the leader loaded them in {loaded_s:.1f} s: RSS {_mb(rss)} (peak {_mb(peak)})")
            # The jobs were registered a minute or so before the leader loaded them: its first rounds
            # catch their ticks up (tens of thousands of rows), which is not the steady tick write.
            await _sleep(args.warmup, self.roles)
            # The executors work that catch-up off for a while after the leader wrote it, and their
            # claims compete with the leader's writes: the window opens once they are done.
            drained_s = await _drained(conn, self.roles, timeout_s=args.drain_timeout)
            catch_up = written(self.roles.log_of("dispatcher"))
            window_start = datetime.now(UTC)
            say(f"measuring the tick writes for {args.window:g} s")
            await _sleep(args.window, self.roles)
            rounds = [w for w in written(self.roles.log_of("dispatcher")) if w.ts > window_start]
            say(f"timing the API ({args.requests} requests each)")
            timings = await self._pages(http)
            rss_after = proc_rss(leader)
        self.roles.stop()
        durations = [r.duration_ms for r in rounds]
        longest = max((w.duration_ms for w in catch_up), default=0.0)
        rows = [float(r.rows) for r in rounds]
        failed = (rss or 0) >= TARGET_RSS or pct(durations, 0.99) >= TARGET_WRITE_MS
        head = f"cronos bench million --jobs {args.jobs} --executors {args.executors} --window {args.window:g}"
        print(f"\n{head} (mix: 70 % hourly, 25 % daily, 5 % every minute, at random seconds; roles at defaults)")
        lines = [
            ("leader RSS", f"{_mb(rss)} after loading {args.jobs:,} jobs in {loaded_s:.1f} s (peak {_mb(peak)},"
                           f" {_mb(rss_after)} at the end) [target < {_mb(TARGET_RSS)}]"),
            ("tick write", f"p50 {pct(durations, 0.5):.1f} ms, p99 {pct(durations, 0.99):.1f} ms,"
                           f" max {max(durations, default=0):.1f} ms over {len(rounds)} rounds"
                           f" [target < {TARGET_WRITE_MS:g} ms]"),
            ("rows a round", f"p50 {pct(rows, 0.5):.0f}, max {max(rows, default=0):.0f}"),
            ("catch-up", f"{sum(w.rows for w in catch_up):,} rows in {len(catch_up)} rounds before the window,"
                         f" the longest {longest:,.0f} ms (--warmup {args.warmup:g} s, then {drained_s:.1f} s"
                         " until no run was overdue)"),
        ]  # fmt: skip
        for timing in timings:
            slow = pct(timing.ms, 0.99) >= TARGET_PAGE_MS or timing.status != 200
            failed = failed or slow
            lines.append(
                (
                    timing.name,
                    f"p50 {pct(timing.ms, 0.5):.1f} ms, p99 {pct(timing.ms, 0.99):.1f} ms, max {max(timing.ms):.1f} ms"
                    f" ({timing.items} items, HTTP {timing.status}) [target < {TARGET_PAGE_MS:g} ms]",
                )
            )
        width = max(len(name) for name, _ in lines)
        print("\n".join(f"  {name:<{width}}  {value}" for name, value in lines), flush=True)
        return 1 if failed else 0

    async def _pages(self, http: aiohttp.ClientSession) -> list[Timing]:
        base = self.roles.base_url
        # A cursor deep in the list, as the API makes it: the next page's after a job of the middle batch.
        middle = f"batch=b{self.args.jobs // 2 // 1000:04d}"
        reply = await _get(http, f"{base}/api/jobs?{urlencode({'selector': middle, 'limit': 1})}")
        deep = reply.get("next_cursor") or ""
        overview = await _get(http, f"{base}/api/jobs/overview?limit=25")
        ids = ",".join(str(item["id"]) for item in overview.get("items", []))
        one = f"m-{self.args.jobs * 3 // 4:07d}"
        calls = [
            ("GET /api/jobs first page", "/api/jobs"),
            ("GET /api/jobs deep page", f"/api/jobs?{urlencode({'cursor': deep})}"),
            ("GET /api/jobs label selector", f"/api/jobs?{urlencode({'selector': 'team=team-07,env=prod'})}"),
            ("console: overview first page", "/api/jobs/overview?limit=25"),
            ("console: name search", f"/api/jobs/overview?{urlencode({'q': one, 'limit': 25})}"),
            ("console: label selector", f"/api/jobs/overview?{urlencode({'selector': 'team=team-07', 'limit': 25})}"),
            ("console: page health", f"/api/jobs/health?{urlencode({'ids': ids})}"),
        ]
        return [await _time(http, name, f"{base}{path}", self.args.requests) for name, path in calls]


async def _get(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url) as resp:
        body: dict[str, Any] = await resp.json(content_type=None)
        if resp.status != 200:
            raise RuntimeError(f"GET {url} answered {resp.status}: {body}")
        return body


async def _time(http: aiohttp.ClientSession, name: str, url: str, count: int) -> Timing:
    spent: list[float] = []
    status, items = 0, 0
    for _ in range(count):
        began = time.perf_counter()
        async with http.get(url) as resp:
            body = await resp.read()
            status = resp.status
        spent.append((time.perf_counter() - began) * 1000)
        items = len(msgspec.json.decode(body).get("items", [])) if status == 200 else 0
    return Timing(name, spent, status, items)


# Queued runs more than a second past due: what the executors have still to work off.
_OVERDUE = "SELECT count(*) FROM runs WHERE state = 'queued' AND due_at < now() - interval '1 second'"


async def _drained(conn: asyncpg.Connection, roles: StagedRoles, timeout_s: float) -> float:
    """Until no queued run is overdue; the seconds it took. Says how many are left every 5 s."""
    started = time.monotonic()
    said = started
    while (overdue := int(await conn.fetchval(_OVERDUE))) > 0:
        roles.check_alive()
        now = time.monotonic()
        if now - started > timeout_s:
            raise TimeoutError(f"{overdue:,} runs still overdue after {timeout_s:g} s: the executors fall behind")
        if now - said >= 5.0:
            say(f"waiting for the catch-up: {overdue:,} runs overdue")
            said = now
        await asyncio.sleep(0.5)
    return time.monotonic() - started


async def _sleep(seconds: float, roles: StagedRoles) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        roles.check_alive()
        await asyncio.sleep(min(left, 1.0))


def _mb(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.0f} MB"


def main(settings: Settings, argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.jobs < 2 or args.executors < 1 or args.window <= 0 or args.requests < 1 or args.warmup < 0:
        print(
            "cronos bench million: --jobs >= 2, --executors >= 1, --window > 0, --requests >= 1, --warmup >= 0",
            file=sys.stderr,
        )
        return 2
    return run_bench(MillionBench(settings, args))
