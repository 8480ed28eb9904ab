"""Job health (issue 24): the leader's decisions about what happened to a job, as job events, and
its verdict. Pure: facts and `now` in, a new health row and events out; the store reads the facts
and writes what these return in one fenced transaction (cronos.store.health).

Each event names its fact once (`dedupe_key`), so judging the same facts again (a re-scan, a new
leader) writes nothing twice, and each counter of the row moves only past what it already counted
(`last_failure_at`/`last_failure_run_id`, `judged_run_id`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from cronos.events import JobEvent, JobEventKind
from cronos.models import FAIL_REPLACED, SKIP_JOB_INACTIVE, SKIP_SCHEDULE_CHANGED, Expectations

Verdict = Literal["ok", "late", "failing", "overrunning", "missing", "unknown"]
VERDICTS: tuple[Verdict, ...] = ("ok", "late", "failing", "overrunning", "missing", "unknown")

# Skips that follow an operator's own change (a pause, a new schedule): no alarm for what they asked.
EDIT_SKIPS = frozenset({SKIP_JOB_INACTIVE, SKIP_SCHEDULE_CHANGED})
# A run ended by the job's own `replace` policy (a newer tick took over) did not fail its job.
POLICY_FAILURES = frozenset({FAIL_REPLACED})
FINISHED = frozenset({"completed", "failed", "skipped", "cancelled"})
# A run still running this long past its timeout (no finish_within) is overrunning: its executor
# should have ended it (a synchronous task that ignores its timeout).
TIMEOUT_SLACK_S = 5.0


@dataclass(frozen=True, slots=True)
class Health:
    """A job's health row (job_health); a job without one starts from `Health(job_id)`."""

    job_id: int
    verdict: Verdict = "unknown"
    reason: str | None = None
    consecutive_failures: int = 0
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_failure_run_id: int | None = None
    missed_at: datetime | None = None
    judged_run_id: int = 0


@dataclass(frozen=True, slots=True)
class Ended:
    """A run that ended failed, skipped or cancelled (the scan of runs_unhappy_finished)."""

    run_id: int
    job_id: int
    state: str
    scheduled_for: datetime
    attempt: int
    finished_at: datetime
    error: str | None = None
    skip_reason: str | None = None
    retried: bool = False  # a next attempt of its tick exists (a failure with a retry left)


@dataclass(frozen=True, slots=True)
class Success:
    """A job's newest completed run."""

    run_id: int
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class RunFact:
    """A run of a job with expectations, with those of the revision that planned it (None: none)."""

    run_id: int
    state: str
    scheduled_for: datetime
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None
    expectations: Expectations | None


def _key(*parts: object) -> str:
    return ":".join(p.isoformat() if isinstance(p, datetime) else str(p) for p in parts)


def _after(at: datetime, run_id: int, than_at: datetime | None, than_id: int | None) -> bool:
    return than_at is None or (at, run_id) > (than_at, than_id or 0)


def outcomes(row: Health, ended: Sequence[Ended], newest: Success | None) -> tuple[Health, list[JobEvent]]:
    """The job's failed, skipped and cancelled runs and its newest success: `failed` for each
    failure with no retry left (with the streak it makes), `recovered` at the first success after
    a streak, `skipped` (but for an edit's skips) and `cancelled`."""
    events: list[JobEvent] = []
    streak, last_at, last_id = row.consecutive_failures, row.last_failure_at, row.last_failure_run_id
    success_at = row.last_success_at

    def settle(before: datetime | None) -> None:
        """The newest success, once it falls before `before` (None: at the end), ends the streak."""
        nonlocal streak, success_at
        if newest is None or (before is not None and newest.finished_at >= before):
            return
        if streak and (last_at is None or newest.finished_at > last_at):
            events.append(_recovered(row.job_id, newest, streak))
            streak = 0
        if success_at is None or newest.finished_at > success_at:
            success_at = newest.finished_at

    for run in sorted(ended, key=lambda r: (r.finished_at, r.run_id)):
        settle(run.finished_at)
        detail = {"scheduled_for": run.scheduled_for.isoformat(), "attempt": run.attempt}
        counted = run.state == "failed" and not run.retried and run.error not in POLICY_FAILURES
        if counted and _after(run.finished_at, run.run_id, last_at, last_id):
            streak += 1
            last_at, last_id = run.finished_at, run.run_id
            events.append(JobEvent(
                row.job_id, JobEventKind.FAILED, run.finished_at, _key("failed", run.run_id), run.run_id,
                {**detail, "error": run.error, "consecutive_failures": streak},
            ))  # fmt: skip
        elif run.state == "skipped" and run.skip_reason not in EDIT_SKIPS:
            events.append(JobEvent(
                row.job_id, JobEventKind.SKIPPED, run.finished_at, _key("skipped", run.run_id), run.run_id,
                {**detail, "reason": run.skip_reason},
            ))  # fmt: skip
        elif run.state == "cancelled":
            events.append(JobEvent(
                row.job_id, JobEventKind.CANCELLED, run.finished_at, _key("cancelled", run.run_id), run.run_id,
                {**detail, "reason": run.error},
            ))  # fmt: skip
    settle(None)
    return (
        replace(row, consecutive_failures=streak, last_failure_at=last_at, last_failure_run_id=last_id,
                last_success_at=success_at),
        events,
    )  # fmt: skip


def _recovered(job_id: int, success: Success, streak: int) -> JobEvent:
    return JobEvent(
        job_id, JobEventKind.RECOVERED, success.finished_at, _key("recovered", success.run_id), success.run_id,
        {"after_failures": streak},
    )  # fmt: skip


def judge_runs(row: Health, runs: Iterable[RunFact], now: datetime) -> tuple[Health, list[JobEvent], bool]:
    """A job's runs after `row.judged_run_id` (ascending by id) against their expectations: late
    start (also while still waiting to start), overran (also while running), too fast. Returns the
    row (its newest success; `judged_run_id` moved over the finished runs before the first one that
    is not), the events, and whether a run waits past its start_within now."""
    events: list[JobEvent] = []
    judged, open_seen, late_now = row.judged_run_id, False, False
    success_at = row.last_success_at
    for run in runs:
        exp = run.expectations
        if exp is not None:
            found = _judge(row.job_id, run, exp, now)
            events.extend(found)
            if run.state in ("queued", "waiting") and any(e.kind == JobEventKind.LATE_START for e in found):
                late_now = True
        if run.state == "completed" and run.finished_at is not None:
            success_at = run.finished_at if success_at is None else max(success_at, run.finished_at)
        if run.state in FINISHED and not open_seen:
            judged = max(judged, run.run_id)
        else:
            open_seen = True
    return replace(row, judged_run_id=judged, last_success_at=success_at), events, late_now


ENDED_STATES = frozenset({"completed", "failed", "cancelled"})  # a run that started ends in one of these


def announced(job_id: int, runs: Iterable[RunFact], kinds: Iterable[str], since: datetime) -> list[JobEvent]:
    """The run events of `kinds` (`started`, `completed`, `ended`: those the job's channels ask for)
    of what happened to the job's runs after `since`: each run's start, and its end once it ended.
    A run is seen on every pass until it ended (the judged cursor): its start is keyed, so written once."""
    wanted = frozenset(kinds)
    events: list[JobEvent] = []
    for run in runs:
        if run.started_at is None:
            continue
        base = {"scheduled_for": run.scheduled_for.isoformat(), "attempt": run.attempt}
        if JobEventKind.STARTED in wanted and run.started_at > since:
            events.append(JobEvent(job_id, JobEventKind.STARTED, run.started_at, _key("started", run.run_id),
                                   run.run_id, base))  # fmt: skip
        if run.finished_at is None or run.finished_at <= since or run.state not in ENDED_STATES:
            continue
        ended = {**base, "state": run.state, "duration_s": None if run.duration_s is None else round(run.duration_s, 3)}
        if JobEventKind.COMPLETED in wanted and run.state == "completed":
            events.append(JobEvent(job_id, JobEventKind.COMPLETED, run.finished_at, _key("completed", run.run_id),
                                   run.run_id, ended))  # fmt: skip
        if JobEventKind.ENDED in wanted:
            events.append(JobEvent(job_id, JobEventKind.ENDED, run.finished_at, _key("ended", run.run_id),
                                   run.run_id, ended))  # fmt: skip
    return events


def _judge(job_id: int, run: RunFact, exp: Expectations, now: datetime) -> list[JobEvent]:
    found: list[JobEvent] = []
    base = {"scheduled_for": run.scheduled_for.isoformat(), "attempt": run.attempt}
    if exp.start_within_s is not None and run.attempt == 1 and run.state != "skipped":
        start = run.started_at or (now if run.state in ("queued", "waiting") else None)
        if start is not None and (start - run.scheduled_for).total_seconds() > exp.start_within_s:
            delay = (start - run.scheduled_for).total_seconds()
            found.append(JobEvent(
                job_id, JobEventKind.LATE_START, start, _key("late_start", run.run_id), run.run_id,
                {**base, "expected_s": exp.start_within_s, "delay_s": round(delay, 3),
                 "started": run.started_at is not None},
            ))  # fmt: skip
    if exp.finish_within_s is not None and run.started_at is not None:
        took = run.duration_s if run.finished_at is not None else (now - run.started_at).total_seconds()
        ran = run.state in ("running", "completed", "failed", "cancelled")
        if ran and took is not None and took > exp.finish_within_s:
            found.append(overran(job_id, run.run_id, run.started_at, exp.finish_within_s, took, base))
    fast = exp.not_faster_than_s
    took = run.duration_s
    if fast is not None and run.state == "completed" and took is not None and took < fast and run.finished_at:
        found.append(JobEvent(
            job_id, JobEventKind.TOO_FAST, run.finished_at, _key("too_fast", run.run_id), run.run_id,
            {**base, "expected_s": fast, "took_s": round(took, 3)},
        ))  # fmt: skip
    return found


def overran(
    job_id: int, run_id: int, started_at: datetime, limit_s: float, took_s: float, detail: dict[str, object]
) -> JobEvent:
    """Overran: `took_s` past `limit_s` (finish_within, or the timeout); at the instant it crossed it."""
    return JobEvent(
        job_id, JobEventKind.OVERRAN, started_at + timedelta(seconds=limit_s), _key("overran", run_id), run_id,
        {**detail, "expected_s": limit_s, "took_s": round(took_s, 3)},
    )  # fmt: skip


def overrun_limit_s(exp: Expectations | None, timeout_s: float) -> float:
    """How long a run may run before it is overrunning: the job's finish_within, else its timeout
    and a slack (its executor should have ended it by then)."""
    if exp is not None and exp.finish_within_s is not None:
        return exp.finish_within_s
    return timeout_s + TIMEOUT_SLACK_S


def dry_spell(row: Health, exp: Expectations | None, since: datetime, now: datetime) -> JobEvent | None:
    """no_success when the job has had no completed run for its success_every_s, counted from its
    newest success or else from `since` (the job's last change: a new expectation, a resume, starts
    the period anew). One event per dry spell: keyed by the spell's start."""
    if exp is None or exp.success_every_s is None:
        return None
    start = max(row.last_success_at or since, since)
    if (now - start).total_seconds() <= exp.success_every_s:
        return None
    at = start + timedelta(seconds=exp.success_every_s)
    return JobEvent(
        row.job_id, JobEventKind.NO_SUCCESS, at, _key("no_success", row.job_id, start), None,
        {"expected_s": exp.success_every_s, "since": start.isoformat()},
    )  # fmt: skip


def missed(job_id: int, tick: datetime) -> JobEvent:
    """A tick of the schedule with neither a run nor a recorded skip (the reconciliation auditor)."""
    return JobEvent(job_id, JobEventKind.MISSED, tick, _key("missed", job_id, tick), None,
                    {"scheduled_for": tick.isoformat()})  # fmt: skip


def verdict(row: Health, *, overrunning: bool = False, late: bool = False, dry: bool = False) -> tuple[Verdict, str]:
    """The job's verdict and its reason, worst first: overrunning, failing, missing, late, ok; unknown
    while nothing has ended yet."""
    if overrunning:
        return "overrunning", "a run is still running past its expected finish"
    if row.consecutive_failures:
        n = row.consecutive_failures
        return "failing", f"the last {n} run{'s' if n > 1 else ''} failed" if n > 1 else "the last run failed"
    if row.missed_at is not None and (row.last_success_at is None or row.last_success_at < row.missed_at):
        return "missing", f"the tick at {row.missed_at.isoformat()} has no run and no recorded skip"
    if dry:
        return "missing", "no successful run within its success_every_s"
    if late:
        return "late", "a run waits past its start_within_s"
    if row.last_success_at is None and row.last_failure_at is None:
        return "unknown", "no run has finished yet"
    return "ok", "runs as expected"


def unrecorded(job_id: int, newest_success: datetime | None) -> Health:
    """The health of a job the evaluator has no row for: nothing failed, no expectation judged."""
    row = Health(job_id, last_success_at=newest_success)
    v, reason = verdict(row)
    return replace(row, verdict=v, reason=reason)
