"""The leader's health evaluator (issue 24): job events and verdicts from the ledger, fenced.

Each pass reads facts (cronos.store.health), decides with the pure cronos.health and writes the
events, the changed health rows and its watermark in one transaction fenced by the epoch:

* runs that ended failed, skipped or cancelled since the last pass (a watermark over the partial
  index runs_unhappy_finished, re-read with a small overlap for transactions that committed late:
  each event is written once per fact, and a row counts no failure twice), with the newest success
  of the jobs among them and of the jobs already failing (a recovery);
* the running runs (as many as executors run at once): overran past finish_within, or past the
  timeout when the job sets none (a task that ignores its timeout);
* the runs of the jobs that have expectations, after the last run judged for good: late start,
  overran, too fast, each judged by the expectations of the revision that planned the run; and
  no success within success_every_s.

Missed ticks are the reconciliation auditor's (dispatcher/auditor.py). Per-job metrics (bounded:
a cap and an allow-list) are set from the health rows every `metrics_interval_s`.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import asyncpg

from cronos import health, metrics
from cronos.aio import Foreground, Slices
from cronos.errors import BackendUnavailable, NotLeader
from cronos.events import JobEvent
from cronos.health import Health, RunFact
from cronos.models import Expectations
from cronos.settings import Settings
from cronos.store.health import HealthStore, Running
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.health")

# Runs whose finish committed this long after its finished_at are still found (the scan re-reads it).
OVERLAP = timedelta(seconds=5)


@dataclass(slots=True)
class PassResult:
    events: int = 0  # new events written
    rows: int = 0  # health rows written
    scanned_to: datetime | None = None


def like_patterns(names: Sequence[str]) -> list[str]:
    """An allow-list of job names, `*` and `?` as in a shell, as LIKE patterns."""
    out = []
    for name in names:
        escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out.append(escaped.replace("*", "%").replace("?", "_"))
    return out


class Evaluator:
    def __init__(
        self,
        store: HealthStore,
        check: Callable[[], int],
        interval_s: float,
        *,
        metrics_max: int = 1000,
        metrics_jobs: Sequence[str] = (),
        metrics_interval_s: float = 15.0,
        metric_label_keys: Sequence[str] = (),
        foreground: Foreground | None = None,
    ) -> None:
        self._store = store
        self._foreground = foreground  # the leader's tick write: a pass waits while it runs
        self._check = check  # the epoch, or NotLeader
        self._interval = interval_s
        self._metrics_max = metrics_max
        self._metrics_patterns = like_patterns(metrics_jobs)
        self._metrics_interval = metrics_interval_s
        self._metric_label_keys = tuple(metric_label_keys)
        self._metrics_at: float | None = None
        self._resume: tuple[datetime, int] | None = None  # a capped scan's next (end, run id)
        self._announced_to: datetime | None = None  # run events were derived up to here (this term)

    async def run(self, term: Lifetime) -> None:
        try:
            while True:
                await term.sleep(self._interval)
                try:
                    judged = await self.once()
                except (NotLeader, BackendUnavailable):
                    raise  # the term is over, or ends for its backend
                except Exception as exc:  # judging must never take the leader down: the next pass retries
                    self._resume = None
                    log.warning("health pass failed: %s", exc, exc_info=True, extra={"event": "health.failed"})
                    continue
                stale = self._metrics_at is None or time.monotonic() - self._metrics_at >= self._metrics_interval
                if stale or judged.rows:  # a changed streak or success shows at once
                    await self.export()
        finally:
            metrics.forget_jobs()  # a node that no longer leads exports no stale per-job series

    async def once(self) -> PassResult:
        store = self._store
        scanned_to, now = await store.scan_from()
        # Within a term a capped scan goes on exactly where it stopped; else from the watermark,
        # less the overlap (finishes that committed late).
        ended, more = await store.ended(self._resume or (scanned_to - OVERLAP, 0), now)
        self._resume = more
        upto = now if more is None else more[0]
        announcing = await store.announcing()
        # Run events of what happened since this term's previous pass; at a term's first, since the
        # scan's watermark (a new leader goes on where the last one stopped; a new channel hears of
        # the runs from its first pass on, never of a job's past).
        since = (scanned_to - OVERLAP) if self._announced_to is None else self._announced_to - OVERLAP
        expecting = {e.job_id: e for e in await store.expecting(announcing)}
        running = await store.running()
        runs = await store.runs_after([(e.job_id, e.judged_run_id) for e in expecting.values()])
        pairs = {
            (r["job_id"], r["revision"])
            for r in runs
            if r["revision"] is not None and r["revision"] != expecting[r["job_id"]].revision
        }
        pairs |= {(r.job_id, r.revision) for r in running if r.revision is not None and r.revision != r.job_revision}
        at_revision = await store.expectations_at(pairs)

        by_job: dict[int, list[health.Ended]] = defaultdict(list)
        for e in ended:
            by_job[e.job_id].append(e)
        events: list[JobEvent] = []
        overrunning: set[int] = set()
        for run in running:
            exp = _exp_of(run.expectations, run.job_id, run.revision, run.job_revision, at_revision)
            event = _overran(run, exp)
            if event is not None:
                events.append(event)
                overrunning.add(run.job_id)
        rows = await store.rows([*by_job, *expecting, *overrunning])
        failing = {j for j, h in rows.items() if h.consecutive_failures or h.verdict != "ok"}
        newest = await store.newest_success({*by_job, *failing})
        facts: dict[int, list[RunFact]] = defaultdict(list)
        for r in runs:
            owner = expecting[r["job_id"]]
            exp = _exp_of(owner.expectations, owner.job_id, r["revision"], owner.revision, at_revision)
            duration = None if r["duration_ms"] is None else r["duration_ms"] / 1000
            facts[owner.job_id].append(RunFact(
                r["run_id"], r["state"], r["scheduled_for"], r["attempt"], r["started_at"], r["finished_at"],
                duration, exp,
            ))  # fmt: skip

        changed: list[Health] = []
        # A pass may judge 50,000 ended runs (a backlog expiring): the leader's loop runs between.
        slices = Slices(foreground=self._foreground)
        for job_id in {*by_job, *expecting, *overrunning, *rows}:
            await slices.next()
            before = rows.get(job_id)
            row, found = health.outcomes(before or Health(job_id), by_job.get(job_id, []), newest.get(job_id))
            events.extend(found)
            late = dry = False
            if (job := expecting.get(job_id)) is not None:
                row, found, late = health.judge_runs(row, facts.get(job_id, []), now)
                events.extend(found)
                if job_id in announcing:
                    events.extend(health.announced(job_id, facts.get(job_id, []), announcing[job_id], since))
                if job.status == "active" and (spell := health.dry_spell(row, job.expectations, job.updated_at, now)):
                    events.append(spell)
                    dry = True
            verdict, reason = health.verdict(row, overrunning=job_id in overrunning, late=late, dry=dry)
            row = replace(row, verdict=verdict, reason=reason)
            if row != before:
                changed.append(row)
        new = await store.write(self._check(), events, changed, upto)
        self._announced_to = now
        for event in events:  # decided (a re-read decides the same facts again: written once)
            log.debug(
                "job event decided",
                extra={"event": "health.decided", "kind": str(event.kind), "job_id": event.job_id,
                       "run_id": event.run_id, "dedupe_key": event.dedupe_key},
            )  # fmt: skip
        if new:
            log.info(
                "job events written",
                extra={"event": "health.events", "new": new, "ended": len(ended), "rows": len(changed)},
            )
        return PassResult(events=new, rows=len(changed), scanned_to=upto)

    async def export(self) -> None:
        """Per-job gauges of at most `metrics_max` jobs matching the allow-list (the rest counted as
        dropped): a scrape costs the same with 100,000 jobs."""
        self._metrics_at = time.monotonic()
        if self._metrics_max == 0:
            metrics.forget_jobs()
            return
        rows = await self._store.metrics(self._metrics_patterns, self._metrics_max)
        total = rows[0]["total"] if rows else 0
        metrics.set_jobs(
            [(r["name"], r["consecutive_failures"], r["last_success_at"], r["labels"]) for r in rows],
            dropped=total - len(rows),
            label_keys=self._metric_label_keys,
        )


def _exp_of(
    current: Expectations | None,
    job_id: int,
    revision: int | None,
    job_revision: int,
    at_revision: dict[tuple[int, int], Expectations],
) -> Expectations | None:
    """The expectations a run is judged by: those of the revision that planned it (a run planned
    before an edit keeps the rule of its tick); the job's own for a run from before revisions."""
    if revision is None or revision == job_revision:
        return current
    return at_revision.get((job_id, revision))


def _overran(run: Running, exp: Expectations | None) -> JobEvent | None:
    limit = health.overrun_limit_s(exp, run.timeout_s)
    took = (run.now - run.started_at).total_seconds()
    if took <= limit:
        return None
    detail: dict[str, object] = {"scheduled_for": run.scheduled_for.isoformat(), "attempt": run.attempt}
    if exp is None or exp.finish_within_s is None:
        detail["reason"] = "still running past its timeout"
    return health.overran(run.job_id, run.run_id, run.started_at, limit, took, detail)


async def run(
    term: Lifetime,
    pool: asyncpg.Pool,
    check: Callable[[], int],
    settings: Settings,
    foreground: Foreground | None = None,
) -> None:
    """The evaluator of a leadership term, as settings say (dispatcher.term starts it)."""
    await Evaluator(
        HealthStore(pool), check, settings.health_interval_s,
        metrics_max=settings.job_metrics_max, metrics_jobs=settings.job_metrics_jobs,
        metric_label_keys=settings.metric_label_keys, foreground=foreground,
    ).run(term)  # fmt: skip
