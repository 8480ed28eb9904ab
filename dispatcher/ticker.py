"""The leader's tick loops: read the clock, plan, write the ledger, push, sleep.

Two loops side by side. The writer (`write_once(now)`) applies job changes, puts every queued
run back in the outbox when asked (election, Redis lost its data), writes every tick due up to
`now + LOOKAHEAD_S` in fenced batches (ledger first) and hands them to the outbox
(dispatcher.outbox), then takes from the ledger's outbox what others queued (manual triggers,
retries, chain runs, woken runs) or put back, due within the push lead. The outbox's own loop
pushes the held ticks `push_lead_ms` before they are due. Each loop sleeps until its next instant
or a change. Tests drive `run_once(now)` (writer, then outbox) with a fake `now`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from cronos import metrics
from cronos.aio import Foreground
from cronos.models import SKIP_MISFIRED, SKIP_PENDING, DispatchJob
from cronos.rules import Blackout, Calendar, RuleBook
from cronos.settings import Settings
from cronos.store.ledger import Ledger
from cronos.store.rules import RuleStore
from dispatcher.herds import Herds
from dispatcher.host_fanout import HostRoster
from dispatcher.listener import Change
from dispatcher.outbox import Outbox, sleep_until
from dispatcher.planner import CATCH_UP_PER_S, TickBatch
from dispatcher.publisher import Publisher
from dispatcher.schedule_book import ScheduleBook

log = logging.getLogger("dispatcher.ticker")

_JOB_OPS = frozenset({"created", "updated", "deleted", "paused", "resumed"})
_QUEUE_OPS = frozenset({"triggered", "retry", "chain", "woken"})  # queued runs to push when due
_LOAD_CHUNK = 5000
_RESYNC_SLACK = timedelta(seconds=10)  # a write committed late still has an updated_at after the watermark
# Tokens go out this long before their due time. The service passes settings.push_lead_ms;
# this is the same default.
PUSH_LEAD_MS = Settings().push_lead_ms
# Ticks are written to the ledger ahead of their time, queued with their due time, so the token
# goes out at its push time instead of after an insert: the push lead and this margin ahead (a
# second's thousand rows take ~60-150 ms; an instant's thousands are a herd, planned earlier by
# dispatcher.herds). Not further: written a whole second ahead, the write of :01 landed at :00,
# while the executors claimed :00, and their claims took that much longer.
WRITE_MARGIN_S = 0.25


def write_ahead_s(push_lead_ms: int) -> float:
    """How far ahead of their due time the leader writes ticks: their push time, and a margin."""
    return push_lead_ms / 1000 + WRITE_MARGIN_S


LOOKAHEAD_S = write_ahead_s(PUSH_LEAD_MS)  # at the defaults, half a second
# Fenced tick transactions in flight at once (each on its own connection).
WRITERS = 2
# Rows a tick transaction holds at most: a second's thousand ticks (a million jobs) go in two
# transactions side by side, not one (1,000 rows: 46 ms in one, 31 ms in two on a 2-core box).
BATCH_ROWS = 500


@dataclass(slots=True)
class Round:
    queued: int = 0  # new queued runs written
    skipped: int = 0  # new skipped runs written ("misfired", or SKIP_PENDING: `held` of them)
    held: int = 0  # new runs written skipped SKIP_PENDING (lifecycle.one_pending)
    pushed: int = 0  # tokens pushed
    more: bool = False  # work left over (a capped catch-up): run again at once


def utcnow() -> datetime:
    return datetime.now(UTC)


class Ticker:
    def __init__(
        self,
        ledger: Ledger,
        publisher: Publisher,
        epoch: Callable[[], int],
        *,
        resync_interval_s: float = 30.0,
        probe_interval_s: float = 1.0,
        max_rows: int = 1_000_000,  # bounds a huge catch-up; the rest is written next round
        batch_rows: int = BATCH_ROWS,
        lookahead_s: float | None = None,  # None: write_ahead_s(push_lead_ms)
        push_lead_ms: int = PUSH_LEAD_MS,
        catchup_per_s: float = CATCH_UP_PER_S,
        rules: RuleStore | None = None,
        stamp_written: bool = False,  # traces are on: tokens carry when their tick was written
    ) -> None:
        self._ledger = ledger
        self._stamp_written = stamp_written
        self._rules = rules  # calendars and blackouts, reloaded on each resync (None: none)
        self._rules_held: tuple[list[Calendar], list[Blackout]] = ([], [])
        self._publisher = publisher
        self._roster = HostRoster(publisher.executors)  # per-host jobs' hosts (cronos.every_host)
        self._epoch = epoch  # the current epoch, or raises LeadershipLost
        self._resync_interval = timedelta(seconds=resync_interval_s)
        self._probe_interval = timedelta(seconds=probe_interval_s)
        self._max_rows = max_rows
        self._batch_rows = batch_rows
        self._lookahead = timedelta(seconds=write_ahead_s(push_lead_ms) if lookahead_s is None else lookahead_s)
        # The leader's background passes (the auditor, the health pass) give way while a round writes.
        self.foreground = Foreground()
        self.book = ScheduleBook(catchup_per_s=catchup_per_s, herds=Herds(lead_s=push_lead_ms / 1000))
        self.outbox = Outbox(ledger, publisher, epoch, push_lead_ms)
        self.wake = asyncio.Event()  # the writer's: a change, a trigger, a re-push request
        self._changes: set[int] = set()
        self._resync_at: datetime | None = None  # None: resync now
        self._unmark = True  # every queued run back in the outbox: on election, and when Redis lost its data
        self._probe_at: datetime | None = None  # None: take from the ledger's outbox now
        self._watermark: datetime | None = None  # resync: changes after this (database time) are reloaded
        self.wrote_at: float | None = None  # unix time of the last tick batch written (the cluster view)

    # --- signals from the other loops (sync, no I/O) ---

    def notify(self, change: Change) -> None:
        if change.op in _QUEUE_OPS:
            self._probe_at = None
        elif change.op in _JOB_OPS and change.job_id is not None:
            self._changes.add(change.job_id)
        else:
            self._resync_at = None
        self.wake.set()

    def request_repush(self) -> None:
        """Redis lost its data: every queued run goes out again."""
        self._unmark = True
        self.wake.set()

    def take_soon(self) -> None:
        """Runs were put back in the outbox (the watchdog) or woken: take them now."""
        self._probe_at = None
        self.wake.set()

    def interrupt(self) -> None:
        """Wake both loops (the term is ending: they check and stop)."""
        self.wake.set()
        self.outbox.wake.set()

    # --- one round ---

    async def run_once(self, now: datetime) -> Round:
        """One writer round, then one outbox round: the deterministic entry point for tests."""
        result = await self.write_once(now)
        result.pushed += await self.outbox.push_once(now)
        return result

    async def write_once(self, now: datetime) -> Round:
        self.wake.clear()
        result = Round()
        if self._resync_at is None or now >= self._resync_at:
            await self._resync(now)
        if self._changes:
            await self._apply_changes()
        unmarked = None
        if self._unmark:
            unmarked = await self.outbox.unmark()
            self._unmark, self._probe_at = False, None
        # Ticks first, then the outbox: a catch-up's newest misfired tick is written before the
        # misfire rule judges the older ticks written ahead (under run_once only the newest runs).
        await self._write_due_ticks(now, result)
        take_at = self.outbox.take_at()
        if self._probe_at is None or now >= self._probe_at or (take_at is not None and take_at <= now):
            taken = await self.outbox.take(now)
            result.pushed += taken
            self._probe_at = now + self._probe_interval
            if unmarked is not None:
                fields = {"event": "runs.repushed", "count": taken, "unmarked": unmarked}
                log.info("queued runs pushed again", extra=fields)
        return result

    def next_wake(self, now: datetime) -> datetime:
        """When the writer has work: ticks to write ahead, a queued run due, a probe, a resync."""
        candidates = [now + self._resync_interval if self._resync_at is None else self._resync_at]
        candidates.append(now if self._probe_at is None else self._probe_at)
        if (due := self.book.next_due()) is not None:
            candidates.append(due - self._lookahead)
        if (herd := self.book.next_herd()) is not None:
            candidates.append(herd)
        if (take_at := self.outbox.take_at()) is not None:
            candidates.append(take_at)
        return min(candidates)

    async def run(self, clock: Callable[[], datetime] = utcnow, checkpoint: Callable[[], None] = lambda: None) -> None:
        """The writer and the outbox's pusher, side by side, until cancelled (or `checkpoint` raises).

        Apart, so that pushing a token at its due time never waits behind a ledger write.
        """
        async with asyncio.TaskGroup() as group:
            group.create_task(self._write_loop(clock, checkpoint), name="dispatcher:write")
            group.create_task(self.outbox.run(clock, checkpoint), name="dispatcher:push")

    async def _write_loop(self, clock: Callable[[], datetime], checkpoint: Callable[[], None]) -> None:
        while True:
            checkpoint()
            result = await self.write_once(clock())
            checkpoint()
            if result.more:
                await asyncio.sleep(0)  # a capped catch-up goes on, letting the other loops run
                continue
            await sleep_until(self.next_wake(clock()), self.wake, clock)

    # --- the steps ---

    async def _resync(self, now: datetime) -> None:
        """Catch what notifications missed: changed jobs since the last resync; all of them when
        the active set's digest (count, sum of ids) disagrees with the book (a deletion)."""
        self._resync_at = now + self._resync_interval
        if self._rules is not None and (found := await self._rules.load()) != self._rules_held:
            # Calendars or blackouts changed (op "rules", or a notification lost): every job's group
            # may change, so the book is rebuilt from the database.
            self._rules_held = found
            self.book.rule_book = RuleBook.of(*found)
            self._watermark = None
            log.info(
                "rules loaded",
                extra={"event": "rules.loaded", "calendars": len(found[0]), "blackouts": len(found[1])},
            )
        if self._watermark is not None:
            count, id_sum, db_now = await self._ledger.active_digest()
            skipped = self._ledger.skipped  # held back for an unusable instant (logged when read)
            await self._apply(await self._ledger.changed_since(self._watermark), set(skipped))
            self._watermark = db_now - _RESYNC_SLACK
            if (count, id_sum) == (len(self.book) + len(skipped), self.book.id_sum + sum(skipped)):
                return
        count, _sum, db_now = await self._ledger.active_digest()
        self.book.clear()
        loaded = 0
        async with contextlib.aclosing(self._ledger.active_jobs()) as chunks:
            async for jobs in chunks:  # a chunk at a time: the renewer must not starve
                self.book.apply(jobs, (), settle=False)
                loaded += len(jobs)
                await asyncio.sleep(0)
        self.book.settle_all()
        # Changes notified meanwhile stay queued: they may postdate the snapshot just loaded.
        self._watermark = db_now - _RESYNC_SLACK
        log.info(
            "schedule loaded",
            extra={"event": "schedule.loaded", "jobs": loaded, "groups": self.book.group_count},
        )

    async def _apply(self, jobs: list[DispatchJob], missing: Iterable[int] = ()) -> None:
        gone = {*missing, *(j.id for j in jobs if j.status != "active")}
        active = [j for j in jobs if j.status == "active"]
        if len(active) <= _LOAD_CHUNK:
            self.book.apply(active, gone)
        else:  # a bulk change, in chunks: the renewer must not starve
            self.book.apply((), gone)
            for start in range(0, len(active), _LOAD_CHUNK):
                self.book.apply(active[start : start + _LOAD_CHUNK], (), settle=False)
                await asyncio.sleep(0)
            self.book.settle_all()
        # Runs written ahead for jobs now paused or deleted are not pushed: the change that stopped
        # the job skipped (or deleted) them in its own transaction (cronos.store.revisions). A job
        # that ended (completed, expired) keeps its last runs: they are pushed when due.
        stopped = {*missing, *(j.id for j in jobs if j.status == "paused")}
        if stopped:
            self.outbox.drop(stopped)

    async def _apply_changes(self) -> None:
        ids = sorted(self._changes)
        self._changes.clear()
        found = await self._ledger.jobs(ids)
        await self._apply(found, missing=set(ids) - {j.id for j in found})

    async def _write_due_ticks(self, now: datetime, result: Round) -> None:
        # WRITERS batches are in flight at once: PostgreSQL inserts some while the next is planned
        # and earlier ones are pushed.
        slots = asyncio.Semaphore(WRITERS)

        async def write(batch: TickBatch) -> None:
            try:
                fan_out = await self._roster.fan_out(batch, now)
                epoch = self._epoch()
                written = await self._ledger.write_ticks(
                    epoch,
                    batch.job_ids,
                    batch.scheduled_for,
                    batch.due_at,
                    batch.skip_reason,
                    batch.revision,
                    batch.ended,
                    expires_at=batch.expires_at,
                    queues=batch.queues,
                    actions=batch.actions,
                    counted=batch.runs.keys(),
                    shells=batch.shells,
                    held_at=batch.held_at,
                    now=now,
                    fan_out=fan_out,
                )
            finally:
                slots.release()
            self.wrote_at = time.time()
            metrics.LEADER_LAST_WRITE.set(self.wrote_at)
            self.book.advance(batch)
            for job_id in written.ended:
                log.info(
                    "job ended",
                    extra={"event": "job.ended", "job_id": job_id, "status": batch.ended[job_id][0], "epoch": epoch},
                )
            queued = written.queued
            if self._stamp_written:  # the run's span starts at its tick's write (docs/tracing.md)
                stamp = int(self.wrote_at * 1000)
                queued = [msgspec.structs.replace(run, written_ms=stamp) for run in queued]
            result.pushed += await self.outbox.hold(queued, now, epoch)
            result.queued += len(written.queued)
            result.skipped += written.skipped
            result.held += written.held

        horizon = now + self._lookahead
        began = time.perf_counter()
        book_round = self.book.round(now, horizon=horizon, max_rows=self._max_rows, batch_rows=self._batch_rows)
        with self.foreground.running(), book_round as ticks:
            try:
                async with asyncio.TaskGroup() as group:
                    for batch in ticks:
                        await slots.acquire()
                        group.create_task(write(batch))
            except BaseExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the batches failed for one reason (NotLeader, a backend)
        result.more = ticks.truncated
        if written_any := result.queued + result.skipped:
            took = time.perf_counter() - began
            metrics.TICK_WRITE.observe(took)
            metrics.RUNS_SKIPPED.labels(reason=SKIP_MISFIRED).inc(result.skipped - result.held)
            metrics.RUNS_SKIPPED.labels(reason=SKIP_PENDING).inc(result.held)
            # A job held behind its pending run is overload's steady state, not news: each round would say so.
            level = logging.INFO if result.skipped > result.held or ticks.truncated else logging.DEBUG
            fields: dict[str, float] = {"count": result.queued, "skipped": result.skipped, "rows": written_any}
            fields["held"] = result.held
            fields["duration_ms"] = round(took * 1000, 1)
            log.log(level, "ticks written", extra={"event": "ticks.queued", **fields})
