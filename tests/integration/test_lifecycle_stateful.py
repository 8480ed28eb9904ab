"""The run lifecycle as a state machine: random interleavings of its events driven through the real
store (claims, finishes, the reaper, the outbox, the waiting-runs sweep, fenced tick writes) against
PostgreSQL, next to a pure model of every run (by tick identity) that cronos.lifecycle's decisions
and TRANSITIONS drive. After every step the database is checked against the model and against the
guarantees: G1 (one run per tick identity, each claimed once), G3 (one running run per exclusive
job), G5 (a stale epoch writes nothing), every state a RunState and every change a transition of
TRANSITIONS by an actor it names, and the sweep's promise to a waiting run with nothing ahead.

Time: ticks lie in 2030 (due long after the test), so a decision that depends on the clock depends
on it only through due times the machine chooses (on time, late within the grace, late beyond it)
or through runs due now (a retry without backoff, a manual run): for those the model decides at
the instants before and after the call, and the database must agree with one of them.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from cronos import lifecycle
from cronos.errors import Conflict, NotLeader
from cronos.lifecycle import OVERLAP_REASONS, REFUSALS, TERMINAL, TRANSITIONS, Actor, Ahead, Candidate, Overlap, Refused
from cronos.models import (
    FAIL_REPLACED,
    SKIP_BUFFER_FULL,
    SKIP_EXPIRED,
    SKIP_JOB_INACTIVE,
    SKIP_MISFIRED,
    SKIP_OVERLAP,
    SKIP_SCHEDULE_CHANGED,
    RunState,
)
from cronos.store.cancels import CancelStore
from cronos.store.claims import ClaimedRun
from cronos.store.db import connect
from cronos.store.epoch import EpochStore
from cronos.store.jobs import JobStore
from cronos.store.ledger import Ledger
from cronos.store.runs import Outcome, RunStore
from cronos.store.waiters import WAITERS_PER_JOB
from tests.integration.ledger_helpers import BASE, insert_job, insert_run, runs_of, set_epoch

Q, W, R, V = RunState.QUEUED, RunState.WAITING, RunState.RUNNING, RunState.RESERVED
Key = tuple[int, datetime, int]  # a run's tick identity: (job id, scheduled_for, attempt)

POLICIES = ("forbid", "allow", "buffer_one", "buffer_all", "replace")
MISFIRE_POLICIES = ("run_once", "run_all", "skip")
NODES = ("exec-a", "exec-b")
INTRUDER = "exec-x"  # a node that never owned anything
TICKS = 4  # tick n is BASE + n minutes
GRACE_S = 3600.0  # every job's misfire grace


def expiry(due_at: datetime) -> datetime:
    """The expiry the leader stamps on a tick due at `due_at` (lifecycle.expiry, GRACE_S)."""
    return lifecycle.expiry(due_at, GRACE_S)


LEASE_S = 60.0  # far longer than an example: a lease ends only when the machine expires it
FAR_S = 1e8  # a retry backoff or delay due in ~3 years: never late, never overdue
UNTIL = datetime(2100, 1, 1, tzinfo=UTC)  # the outbox's horizon: every queued run is due by then
OVERDUE_S = 60.0  # the watchdog's bound: only runs the machine made late are overdue
LATENESS = {"on_time": None, "late": timedelta(seconds=10), "very_late": timedelta(hours=2)}
NOT_LEADER = "NotLeader"
STATS: Counter[str] = Counter()


def tick(n: int) -> datetime:
    return BASE + timedelta(minutes=n)


def now() -> datetime:
    return datetime.now(UTC)


def on_time(key: Key) -> datetime:
    return lifecycle.on_time_at(key[0], key[1], 0.0)  # the machine's jobs have no jitter


# --- the model ----------------------------------------------------------------------------


@dataclass
class MRun:
    trigger: str
    state: RunState
    due_at: datetime | None  # None: a retry's, its predecessor's finish + delay (checked, then adopted)
    id: int | None = None  # adopted from the database once written
    node: str | None = None
    pushed: int | None = None
    lease: str | None = None  # "live" | "expired" while running; None otherwise
    skip_reason: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    retry_of: tuple[Key, float] | None = None
    cancel_by: str | None = None  # who asked to cancel it (run_cancels; the first asker stays)


@dataclass
class MJob:
    id: int
    policy: str
    misfire_policy: str
    max_retries: int
    backoff_s: float
    status: str = "active"
    cursor: datetime | None = None
    cursor_near: bool = False  # the cursor is PostgreSQL's now() at a resume: compared loosely, then adopted
    revision: int = 1


@dataclass
class Model:
    jobs: dict[int, MJob]
    runs: dict[Key, MRun] = field(default_factory=dict)
    epoch: int = 0

    def copy(self) -> Model:
        return copy.deepcopy(self)

    def keys(self, job_id: int, state: RunState) -> list[Key]:
        """The job's runs in `state`, in tick order."""
        return sorted((k for k, r in self.runs.items() if k[0] == job_id and r.state is state), key=lambda k: k[1:])

    def running_exclusive(self, job_id: int) -> list[Key]:
        """The job's reserved or running runs, if its policy is exclusive (G3's place)."""
        if not lifecycle.exclusive(self.jobs[job_id].policy):  # type: ignore[arg-type]
            return []
        return sorted(self.keys(job_id, R) + self.keys(job_id, V), key=lambda k: k[1:])

    def ahead(self, job_id: int) -> Ahead | None:
        """The job's running exclusive run, as the lifecycle's decisions see it (a reserved one
        starts at its due time)."""
        running = self.running_exclusive(job_id)
        if not running:
            return None
        key, run = running[0], self.runs[running[0]]
        started = run.started_at or run.due_at
        assert started is not None
        return Ahead(key[1], started, key[2], on_time(key))

    def by_id(self, run_id: int) -> tuple[Key, MRun]:
        (found,) = [(k, r) for k, r in self.runs.items() if r.id == run_id]
        return found


# A run made due two hours ago, with the expiry it was stamped with then (GRACE_S after).
LATE_BEYOND_GRACE = (
    "UPDATE runs SET due_at = now() - interval '2 hours', expires_at = now() - interval '1 hour' WHERE id = $1"
)


def _expired(run: MRun, at: datetime) -> bool:
    """lifecycle.expired by the expiry stamped on the run (every job's grace is GRACE_S, and each
    change of a run's due time the machine makes moves its stamp with it: `diffs` checks)."""
    assert run.due_at is not None
    return lifecycle.expired(lifecycle.expiry(run.due_at, GRACE_S), at)


def _skip(run: MRun, reason: str) -> None:
    run.state, run.skip_reason = RunState.SKIPPED, reason


def _wake(run: MRun) -> None:
    run.state, run.pushed = Q, None


def predict_claim(m: Model, keys: list[Key], node: str, at: datetime) -> list[Any]:
    """RunStore.claim(keys' ids): per job, its queued runs in tick order (the newest first under
    replace), each decided by lifecycle.overlap seeing the ones claimed before it as running."""
    decided: dict[Key, Any] = {}
    batch: dict[int, list[Key]] = defaultdict(list)
    for key in dict.fromkeys(keys):
        run = m.runs[key]
        if run.state is not Q:
            decided[key] = Refused.NOT_QUEUED
        elif run.due_at is not None and _expired(run, at):
            _skip(run, SKIP_EXPIRED)  # a token held past the run's grace (lifecycle.expired)
            decided[key] = Refused.EXPIRED
        else:
            batch[key[0]].append(key)
    for job_id, queued in batch.items():
        job = m.jobs[job_id]
        queued.sort(key=lambda k: k[1:], reverse=job.policy == "replace")
        ahead = m.ahead(job_id)
        for key in queued:
            run = m.runs[key]
            assert run.due_at is not None
            # buffer_one: how many of the job's runs wait with an earlier tick (Candidate.earlier_waiting)
            earlier = sum(1 for w in m.keys(job_id, W) if w[1:] < key[1:])
            candidate = Candidate(job.policy, key[1], key[2], run.due_at, ahead, earlier)  # type: ignore[arg-type]
            decision = lifecycle.overlap(candidate, at)
            if decision is Overlap.CLAIM or decision is Overlap.REPLACE:
                if decision is Overlap.REPLACE:
                    for other in m.running_exclusive(job_id):
                        replaced = m.runs[other]
                        replaced.state, replaced.error, replaced.lease = RunState.FAILED, FAIL_REPLACED, None
                run.state, run.node, run.lease, run.started_at = R, node, "live", at
                decided[key] = ("claimed", run.id)
                if lifecycle.exclusive(job.policy):  # type: ignore[arg-type]
                    ahead = Ahead(key[1], at, key[2], on_time(key))
            elif decision is Overlap.WAIT:
                run.state, run.pushed = W, None
                decided[key] = Refused.WAIT
            else:
                _skip(run, OVERLAP_REASONS[decision])
                decided[key] = REFUSALS[decision]
    answers, seen = [], set()
    for key in keys:
        answers.append(Refused.NOT_QUEUED if key in seen else decided[key])
        seen.add(key)
    return answers


def predict_reserve(m: Model, keys: list[Key], node: str, at: datetime) -> list[Any]:
    """RunStore.reserve(keys' ids): the queued runs lifecycle.claims_at_once claims (counted among
    the batch's unfinished runs of their job) reserved by `node`, the others left as they are."""
    batch = list(dict.fromkeys(keys))
    of_job = Counter(k[0] for k in batch if m.runs[k].state not in TERMINAL)
    reserved: set[Key] = set()
    for key in batch:
        run, job = m.runs[key], m.jobs[key[0]]
        if run.state is not Q:
            continue
        assert run.due_at is not None
        if lifecycle.claims_at_once(
            job.policy,  # type: ignore[arg-type]
            running=bool(m.running_exclusive(key[0])),
            expired_=_expired(run, at),
            of_job_in_batch=of_job[key[0]],
        ):
            reserved.add(key)
    for key in reserved:
        run = m.runs[key]
        run.state, run.node, run.lease, run.started_at = V, node, "live", None
    answers, seen = [], set()
    for key in keys:  # a run repeated in the batch is answered once
        answers.append(("reserved", m.runs[key].id) if key in reserved and key not in seen else None)
        seen.add(key)
    return answers


def look_again(m: Model, job_id: int) -> None:
    """A claim that recorded a wait looks again (waiters.wake_free): if nothing of the job runs
    now, the job's first waiting run is woken."""
    if not m.running_exclusive(job_id):
        waiting = m.keys(job_id, W)
        if waiting:
            _wake(m.runs[waiting[0]])


FinishOutcome = tuple[Key, str, str, str | None, float | None]  # run, node, end state, error, retry delay


def predict_finish(m: Model, outcomes: list[FinishOutcome], at: datetime) -> tuple[frozenset[int], int, int, int]:
    """RunStore.finish: the owner's outcomes, each failure's retry, and the job's waiting runs behind
    an exclusive run that ended (lifecycle.after_wait: the first that may run woken, those whose
    forbid wait ran out skipped). (written, retried, chained, woken)."""
    ended: list[tuple[Key, float | None]] = []
    for key, node, state, error, delay in sorted(outcomes, key=lambda o: m.runs[o[0]].id or 0):
        run = m.runs[key]
        if run.state is R and run.node == node:  # a reserved run has not started: nothing to finish
            run.state, run.lease, run.error = RunState(state), None, error
            ended.append((key, delay))
    if not ended:
        return frozenset(), 0, 0, 0
    retried = 0
    for key, delay in ended:
        if m.runs[key].state is RunState.FAILED and delay is not None:
            retried += 1
            following = (key[0], key[1], key[2] + 1)
            if following not in m.runs:
                m.runs[following] = MRun("retry", Q, None, retry_of=(key, delay))
    woken = 0
    for key, _ in ended:
        job = m.jobs[key[0]]
        if not lifecycle.exclusive(job.policy) or m.running_exclusive(job.id):  # type: ignore[arg-type]
            continue
        started = m.runs[key].started_at
        assert started is not None
        done = Ahead(key[1], started, key[2], on_time(key))
        for waiter in m.keys(job.id, W)[:WAITERS_PER_JOB]:
            run = m.runs[waiter]
            assert run.due_at is not None
            candidate = Candidate(job.policy, waiter[1], waiter[2], run.due_at)  # type: ignore[arg-type]
            if lifecycle.after_wait(candidate, done, at) is Overlap.SKIP:
                _skip(run, SKIP_OVERLAP)
                continue
            _wake(run)
            woken += 1
            break
    return frozenset(m.runs[k].id for k, _ in ended if m.runs[k].id is not None), retried, 0, woken


def predict_reap(m: Model, at: datetime) -> tuple[int, int, int]:
    """RunStore.reap: reserved runs whose lease expired back in the outbox (released: they never
    started), running ones failed "executor lost" (with the retry their job has left), or cancelled
    if someone had asked (lifecycle.lost), then pending runs past their grace skipped "expired".
    (lost, expired, retried, released)."""
    released = [k for k, r in m.runs.items() if r.state is V and r.lease == "expired"]
    for key in released:
        run = m.runs[key]
        run.state, run.node, run.lease, run.pushed = Q, None, None, None
    lost = [k for k, r in m.runs.items() if r.state is R and r.lease == "expired"]
    outcomes: list[FinishOutcome] = []
    for key in lost:
        job, run = m.jobs[key[0]], m.runs[key]
        state, error, retried = lifecycle.lost(run.cancel_by)
        delay = lifecycle.retry_delay_s(key[2], job.max_retries, job.backoff_s) if retried else None
        outcomes.append((key, run.node or "", state.value, error, delay))
    written, retried, _, _ = predict_finish(m, outcomes, at)
    expired = 0
    for run in m.runs.values():
        if run.state in lifecycle.PENDING and run.due_at is not None and _expired(run, at):
            _skip(run, SKIP_EXPIRED)
            expired += 1
    return len(written), expired, retried, len(released)


def predict_take(m: Model, at: datetime) -> tuple[list[int], int]:
    """Ledger.take: queued runs not pushed in this epoch, but the scheduled ticks late beyond their
    grace that their misfire policy no longer runs (lifecycle.stale_tick_runs), marked pushed; the
    late ones it still runs due anew at `at`."""
    rows = [k for k, r in m.runs.items() if r.state is Q and r.pushed is None]
    stale, kept = set(), set()
    for key in rows:
        run, job = m.runs[key], m.jobs[key[0]]
        assert run.due_at is not None and run.due_at <= UNTIL
        if run.trigger == "schedule" and key[2] == 1 and _expired(run, at):
            newest = job.cursor is not None and key[1] >= job.cursor
            if not lifecycle.stale_tick_runs(job.misfire_policy, newest_written=newest):  # type: ignore[arg-type]
                stale.add(key)
            else:
                kept.add(key)
    for key in stale:
        _skip(m.runs[key], SKIP_MISFIRED)
    push = sorted((k for k in rows if k not in stale), key=lambda k: (m.runs[k].due_at, m.runs[k].id))
    for key in push:
        m.runs[key].pushed = m.epoch
        if key in kept:  # a stale tick its misfire policy runs is due anew: no claim expires it
            m.runs[key].due_at = at
    return [m.runs[k].id for k in push], len(stale)  # type: ignore[misc]


def predict_cancel(m: Model, key: Key, look: bool = True) -> Any:
    """CancelStore.cancel (lifecycle.cancel): a pending run cancelled at once, and its job's first
    waiting run woken if nothing of the job runs (waiters.wake_free, after the cancel commits;
    `look`: whether it is predicted here); a running run's request recorded (its state unchanged);
    an ended run refused (Conflict)."""
    run = m.runs[key]
    was = run.state
    decision = lifecycle.cancel(was)
    if decision is lifecycle.Cancel.ENDED:
        return "Conflict"
    run.cancel_by = run.cancel_by or CANCELLER
    if decision is lifecycle.Cancel.NOW:
        run.state, run.error, run.pushed = RunState.CANCELLED, lifecycle.cancelled_by(CANCELLER), None
        run.lease = None  # a reserved run's lease ends with it
        if look:
            look_again(m, key[0])
    return (decision.value, was.value)


def predict_unmark(m: Model) -> int:
    unmarked = [r for r in m.runs.values() if r.state is Q and r.pushed is not None]
    for run in unmarked:
        run.pushed = None
    return len(unmarked)


def predict_unmark_overdue(m: Model, leave_out: frozenset[int], at: datetime) -> frozenset[int]:
    late = at - timedelta(seconds=OVERDUE_S)
    overdue = [
        r
        for r in m.runs.values()
        if r.state is Q and r.pushed is not None and r.id not in leave_out and r.due_at is not None and r.due_at < late
    ]
    for run in overdue:
        run.pushed = None
    return frozenset(r.id for r in overdue if r.id is not None)


def predict_sweep(m: Model, seen: frozenset[int], at: datetime) -> tuple[int, int, frozenset[int]]:
    """RunStore.sweep_waiters: every waiting run decided again (lifecycle.overlap) behind its job's
    running run; the first with nothing running ahead is woken if the previous sweep saw it so too."""
    skip: dict[Key, str] = {}
    wake: list[Key] = []
    stranded: set[int] = set()
    for job_id, job in m.jobs.items():
        ahead = m.ahead(job_id)
        for earlier, key in enumerate(m.keys(job_id, W)):
            run = m.runs[key]
            assert run.due_at is not None and run.id is not None
            if ahead is None:
                if earlier == 0:
                    (wake.append(key) if run.id in seen else stranded.add(run.id))  # type: ignore[func-returns-value]
                continue
            candidate = Candidate(job.policy, key[1], key[2], run.due_at, ahead, earlier)  # type: ignore[arg-type]
            decision = lifecycle.overlap(candidate, at)
            if decision in OVERLAP_REASONS:
                skip[key] = OVERLAP_REASONS[decision]
            elif decision is Overlap.CLAIM:
                wake.append(key)
    for key, reason in skip.items():
        _skip(m.runs[key], reason)
    for key in wake:
        _wake(m.runs[key])
    return len(skip), len(wake), frozenset(stranded)


Tick = tuple[int, datetime, datetime, str | None]  # job, tick, due_at, skip reason


def predict_write(m: Model, ticks: list[Tick]) -> tuple[frozenset[Key], int]:
    """Ledger.write_ticks: a job active whose cursor is before its newest tick of the batch gets its
    ticks (those not written yet), queued and pushed by this epoch, or skipped with their reason."""
    queued: set[Key] = set()
    skipped = 0
    by_job: dict[int, list[Tick]] = defaultdict(list)
    for t in ticks:
        by_job[t[0]].append(t)
    for job_id, written in by_job.items():
        job = m.jobs[job_id]
        newest = max(t[1] for t in written)
        if job.status != "active" or (job.cursor is not None and job.cursor >= newest):
            continue
        job.cursor, job.cursor_near = newest, False
        for _, scheduled_for, due_at, reason in written:
            key = (job_id, scheduled_for, 1)
            if key in m.runs:
                continue
            if reason is None:
                m.runs[key] = MRun("schedule", Q, due_at, pushed=m.epoch)
                queued.add(key)
            else:
                m.runs[key] = MRun("schedule", RunState.SKIPPED, due_at, skip_reason=reason)
                skipped += 1
    return frozenset(queued), skipped


def predict_set_status(m: Model, job_id: int, status: str, at: datetime) -> str:
    """JobStore.set_status: the change takes back the job's reserved runs (queued again, their
    tokens still out); a pause then hands over the job's ticks written ahead (skipped "job
    paused"); a resume moves the cursor past the paused time."""
    job = m.jobs[job_id]
    if job.status == status:
        return status
    job.status, job.revision = status, job.revision + 1
    for key, run in m.runs.items():
        if key[0] == job_id and run.state is V:
            run.state, run.node, run.lease = Q, None, None
    if status == "paused":
        for key, run in m.runs.items():
            if key[0] == job_id and run.state is Q and run.trigger == "schedule" and key[2] == 1 and key[1] > at:
                _skip(run, SKIP_JOB_INACTIVE)
    elif job.cursor is None or job.cursor < at:
        job.cursor, job.cursor_near = at, True
    return status


# --- the database's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: str
    state: str
    due_at: datetime
    node_id: str | None
    pushed_epoch: int | None
    exclusive: bool
    lease: str | None
    skip_reason: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    expires_at: datetime | None

    @property
    def key(self) -> Key:
        return (self.job_id, self.scheduled_for, self.attempt)


@dataclass(frozen=True)
class Snapshot:
    rows: tuple[Row, ...]
    jobs: dict[int, tuple[str, datetime | None, int]]  # status, cursor (last_scheduled_for), revision
    exclusive: frozenset[tuple[int, int]]  # runs_running_exclusive: (job, run)

    @property
    def runs(self) -> dict[Key, Row]:
        return {r.key: r for r in self.rows}


ROWS = (
    "SELECT id, job_id, scheduled_for, attempt, trigger, state, due_at, node_id, pushed_epoch, exclusive,"
    " CASE WHEN lease_until IS NULL THEN NULL WHEN lease_until < now() THEN 'expired' ELSE 'live' END AS lease,"
    " skip_reason, error, started_at, finished_at, expires_at FROM runs ORDER BY id"
)
JOBS = "SELECT id, status, last_scheduled_for, revision FROM jobs ORDER BY id"
EXCLUSIVE = "SELECT job_id, run_id FROM runs_running_exclusive"
# CASCADE: the tables that refer to jobs (job_events, notification deliveries, ...) are emptied too.
RESET = (
    "TRUNCATE runs, runs_running_exclusive, run_cancels, jobs, job_revisions, audit_log, concurrency_group_slots"
    " CASCADE"
)
CANCELLER = "sm"  # the API caller that cancels in the machine
INSERT_JOB = (
    "INSERT INTO jobs (name, cron_expression, kind, payload, timeout_s, max_retries, retry_backoff_s,"
    " concurrency_policy, misfire_policy, misfire_grace_s)"
    " VALUES ($1, '* * * * *', 'task', '{}', 30, $2, $3, $4, $5, $6)"
    " RETURNING id"
)


async def read(pool: asyncpg.Pool) -> Snapshot:
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        rows = tuple(Row(**dict(r)) for r in await conn.fetch(ROWS))
        jobs = {r["id"]: (r["status"], r["last_scheduled_for"], r["revision"]) for r in await conn.fetch(JOBS)}
        exclusive = frozenset((r["job_id"], r["run_id"]) for r in await conn.fetch(EXCLUSIVE))
    return Snapshot(rows, jobs, exclusive)


def diffs(m: Model, s: Snapshot) -> list[str]:
    """Where the database is not what the model predicts."""
    out = []
    db = s.runs
    for key in sorted(set(m.runs) ^ set(db), key=str):
        out.append(f"{key}: {'only in the model' if key in m.runs else 'only in the database'}")
    for key in sorted(set(m.runs) & set(db), key=str):
        run, row = m.runs[key], db[key]
        expected: dict[str, Any] = {
            "trigger": run.trigger,
            "state": run.state.value,
            "node_id": run.node,
            "pushed_epoch": run.pushed,
            "lease": run.lease,
            "skip_reason": run.skip_reason,
            "error": run.error,
        }
        if run.id is not None:
            expected["id"] = run.id
        if run.due_at is not None:
            expected["due_at"] = run.due_at
        elif run.retry_of is not None:  # the retry is due its backoff after the failure
            failed = db[run.retry_of[0]]
            assert failed.finished_at is not None
            expected["due_at"] = failed.finished_at + timedelta(seconds=run.retry_of[1])
        if row.state in {s.value for s in lifecycle.PENDING}:  # stamped once, when written (lifecycle.expiry)
            expected["expires_at"] = lifecycle.expiry(row.due_at, GRACE_S)
        for name, value in expected.items():
            if getattr(row, name) != value:
                out.append(f"{key} (run {row.id}): {name} is {getattr(row, name)!r}, the model says {value!r}")
    for job_id, job in m.jobs.items():
        status, cursor, revision = s.jobs[job_id]
        if (status, revision) != (job.status, job.revision):
            out.append(f"job {job_id}: {(status, revision)}, the model says {(job.status, job.revision)}")
        near = job.cursor_near and cursor is not None and job.cursor is not None
        if not (cursor == job.cursor or (near and abs(cursor - job.cursor) < timedelta(seconds=5))):  # type: ignore[operator]
            out.append(f"job {job_id}: cursor {cursor}, the model says {job.cursor}")
    return out


def adopt(m: Model, s: Snapshot) -> None:
    """What the model could not know before the write: new runs' ids, a retry's due time, start times."""
    db = s.runs
    for key, run in m.runs.items():
        row = db[key]
        run.id, run.due_at = row.id, row.due_at
        if run.state is R or run.started_at is not None:
            run.started_at = row.started_at
    for job_id, job in m.jobs.items():
        if job.cursor_near:
            job.cursor = s.jobs[job_id][1]


# Transitions by (from, to, actor); a tick can be written as skipped (WRITTEN, then MISFIRED at once).
CREATED = [t for t in TRANSITIONS if not t.sources]
REASON_ALIASES = {
    lifecycle.Event.OVERLAPPED: {SKIP_BUFFER_FULL},
    lifecycle.Event.HANDED_OVER: {SKIP_SCHEDULE_CHANGED},
}


def _reasons(transitions: Iterable[lifecycle.Transition]) -> set[str | None]:
    out: set[str | None] = set()
    for t in transitions:
        out.add(t.reason)
        out |= REASON_ALIASES.get(t.event, set())
    return out


Actors = Actor | frozenset[Actor]  # who made a step's calls (a race of the API and an executor: both)


def _by(t: lifecycle.Transition, actor: Actors) -> bool:
    return bool(actor & t.actors) if isinstance(actor, frozenset) else actor in t.actors


def _path_ends(starts: Iterable[RunState], target: RunState, actor: Actors, steps: int) -> list[lifecycle.Transition]:
    """The last transitions of the paths of 1 to `steps` transitions by `actor` from `starts` to `target`."""
    ends, frontier = [], set(starts)
    for _ in range(steps):
        reached = set()
        for t in TRANSITIONS:
            if t.sources & frontier and _by(t, actor):
                reached.add(t.target)
                if t.target is target:
                    ends.append(t)
        frontier = reached
    return ends


def change_error(before: Row | None, after: Row | None, actor: Actors | None, steps: int = 1) -> str | None:
    """Why a run's change between two snapshots is no transition of TRANSITIONS that `actor` makes
    (None: the machine's own write, which moves time only: due times, leases). `steps`: the calls
    the step made at once, each a transition of the run at most (a race: a claim, then the other
    claimant's replace)."""
    if after is None:
        return "a run disappeared"
    state = RunState(after.state)  # every state is a RunState
    if before is None:
        if actor is None:
            return "the machine's own write created a run"
        created = [t for t in CREATED if _by(t, actor)]
        if any(t.target is state for t in created):
            return None
        # and at once further (a tick written as skipped: WRITTEN, then MISFIRED)
        ends = _path_ends({t.target for t in created}, state, actor, steps)
        if ends and after.skip_reason in _reasons(ends):
            return None
        return f"a run created {state} ({after.skip_reason}) by {actor}"
    old = RunState(before.state)
    if old in TERMINAL:
        return None if before == after else f"a {old} run changed: {before} -> {after}"
    if old is state:
        # queued -> queued (pushed, unpushed): the outbox's mark moves only by a transition that says so
        # (or, in a race, a cycle through another state: a claim waits, the end it raced wakes it)
        marked = actor is not None and bool(_path_ends({old}, old, actor, steps))
        if before.pushed_epoch != after.pushed_epoch and not marked:
            return f"{old} run's pushed mark moved {before.pushed_epoch} -> {after.pushed_epoch} by {actor}"
        return None
    if actor is None:
        return f"the machine's own write moved a run {old} -> {state}"
    ends = _path_ends({old}, state, actor, steps)
    if not ends:
        return f"{old} -> {state} by {actor} is no transition" + (f" (nor {steps} at once)" if steps > 1 else "")
    if state is RunState.SKIPPED and after.skip_reason not in _reasons(ends):
        return f"{old} -> skipped by {actor} with reason {after.skip_reason!r}"
    if state is RunState.FAILED and all(t.reason for t in ends) and after.error not in _reasons(ends):
        return f"{old} -> failed by {actor} with error {after.error!r}"
    return None


# --- the machine ---------------------------------------------------------------------------------

_EPOCH0 = datetime(1970, 1, 1, tzinfo=UTC)


def ms(instant: datetime) -> int:
    return (instant - _EPOCH0) // timedelta(milliseconds=1)


@dataclass
class World:
    """One event loop and pool for every example of a test (a machine per example uses them)."""

    loop: asyncio.AbstractEventLoop
    pool: asyncpg.Pool


def _claims(answers: Any, _snap: Snapshot) -> Any:
    return [("claimed", a.id) if isinstance(a, ClaimedRun) else a for a in answers]


def _finished(result: Any, _snap: Snapshot) -> Any:
    return (frozenset(result.written), result.retried, result.chained, result.woken)


def _same(expected: Any, actual: Any) -> bool:
    return bool(expected == actual)


def wait_recorded_after_the_end(
    m: Model, ended: list[FinishOutcome], queued: Key, node: str, at: datetime
) -> list[tuple[Model, list[Any]]]:
    """An end racing a claim of its job, beyond the serializations: the claim read the run still
    running (its end not committed) and decided to wait; the wait is recorded before the end's look
    for waiters or after it; then the claim looks again. (What the end and the claim return.)"""
    options = []
    for recorded_first in (True, False):
        n = m.copy()
        decided = n.copy()
        answers = predict_claim(decided, [queued], node, at)
        if answers != [Refused.WAIT]:
            return []
        if recorded_first:
            n.runs[queued].state, n.runs[queued].pushed = W, None
        finished = predict_finish(n, ended, at)
        if not recorded_first and n.runs[queued].state is Q:
            n.runs[queued].state, n.runs[queued].pushed = W, None
        look_again(n, queued[0])
        options.append((n, [finished, answers]))
    return options


def wake_lost_to_the_cancel(
    m: Model, cancelled: Key, ended: list[FinishOutcome], at: datetime
) -> list[tuple[Model, list[Any]]]:
    """A cancel of a waiting run racing the end of the run ahead of it, beyond the serializations:
    the end read the run still waiting (the cancel not committed) and woke it once the cancel had
    committed, which woke nothing (the run cancelled; the end answers woken 0); the cancel's look
    after its commit found nothing running and woke the next waiting run. (What the two return.)"""
    n = m.copy()
    if n.runs[cancelled].state is not W:
        return []
    finished = predict_finish(n, ended, at)  # the end as it read the job: the run still waiting
    if n.runs[cancelled].state is not Q or finished[3] != 1:
        return []  # the end woke another run, or none: a serialization covers it
    predict_cancel(n, cancelled, look=False)
    look_again(n, cancelled[0])
    return [(n, [("now", "waiting"), (*finished[:3], 0)])]


Predict = Callable[[Model, datetime], Any]
Normal = Callable[[Any, Snapshot], Any]
_names = itertools.count(1)


class LifecycleMachine(RuleBasedStateMachine):
    world: World | None = None  # set by the test: its database

    def __init__(self) -> None:
        super().__init__()
        assert self.world is not None, "run by test_lifecycle_state_machine"
        self.loop, self.pool = self.world.loop, self.world.pool
        self.store, self.ledger = RunStore(self.pool), Ledger(self.pool)
        self.epochs, self.job_store = EpochStore(self.pool), JobStore(self.pool)
        self.model: Model | None = None
        self.prev: Snapshot | None = None
        self.snap: Snapshot | None = None
        self.actor: Actors | None = None
        self.steps = 1  # how many calls the last step made at once
        self.claimed: set[int] = set()  # every run id a claim returned (G1: never twice)
        self.stranded: frozenset[int] = frozenset()  # the last sweep's (the leader passes it to the next)
        self.budget: Counter[str] = Counter({"elected": 3, "status": 2, "trigger": 3, "cancel": 4})  # per example
        STATS["examples"] += 1

    def run(self, aw: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(aw)

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    # -- a step: the calls (concurrent when several), then the model's options; the database must be one

    def interleave(
        self,
        label: str,
        actor: Actors | None,
        calls: list[Callable[[], Awaitable[Any]]],
        predicts: list[Predict],
        normals: list[Normal] | None = None,
        same: Callable[[list[Any], list[Any]], bool] = _same,
        extra: Callable[[datetime], list[tuple[Model, list[Any]]]] | None = None,
        transitions: int = 1,
    ) -> list[Any]:
        """Run `calls` at once; then the database and each result must be what `predicts` say of the
        model, applied in some order (one of the serializations), at some instant of the calls, or
        one of the `extra` outcomes (of statements of one call interleaved with another's).
        `transitions`: how many transitions of one run each call may make."""

        async def guarded(call: Callable[[], Awaitable[Any]]) -> Any:
            try:
                return await call()
            except NotLeader:
                return NOT_LEADER

        t0 = now()

        async def together() -> list[Any]:
            return await asyncio.gather(*(guarded(c) for c in calls))

        results = self.run(together())
        t1 = now()
        after = self.run(read(self.pool))
        normals = normals or [lambda r, _s: r] * len(calls)
        actual = [r if r == NOT_LEADER else n(r, after) for r, n in zip(results, normals, strict=True)]
        options = []
        for order in itertools.permutations(range(len(calls))):
            for at in (t0, t1):
                m = self.m.copy()
                expected: list[Any] = [None] * len(calls)
                for i in order:
                    expected[i] = predicts[i](m, at)
                options.append((m, expected))
        for at in (t0, t1):
            options.extend(extra(at) if extra else [])
        self.settle(label, actor, options, actual, after, same, steps=len(calls) * transitions)
        return list(results)

    def step(
        self, label: str, actor: Actor | None, call: Callable[[], Awaitable[Any]], predict: Predict,
        normal: Normal | None = None, transitions: int = 1,
    ) -> Any:  # fmt: skip
        normals = [normal] if normal else None
        return self.interleave(label, actor, [call], [predict], normals, transitions=transitions)[0]

    def settle(
        self,
        label: str,
        actor: Actors | None,
        options: list[tuple[Model, Any]],
        actual: Any,
        after: Snapshot,
        same: Callable[[Any, Any], bool] = _same,
        steps: int = 1,
    ) -> None:
        report = []
        for m, expected in options:
            wrong = diffs(m, after)
            if not wrong and same(expected, actual):
                adopt(m, after)
                self.model, self.prev, self.snap, self.actor, self.steps = m, self.snap, after, actor, steps
                STATS[label] += 1
                return
            report.append(f"  expected {expected!r}; the database differs: {wrong}")
        raise AssertionError(f"{label}: returned {actual!r}; no option of the model matches:\n" + "\n".join(report))

    def fenced(self, label: str, stale: bool, call: Callable[[int], Awaitable[Any]], predict: Predict,
               normal: Normal | None = None) -> Any:  # fmt: skip
        """A leader's write with the current epoch, or a stale one: NotLeader, nothing written (G5)."""
        epoch = self.m.epoch - 1 if stale else self.m.epoch
        before = self.snap

        def model(m: Model, at: datetime) -> Any:
            return NOT_LEADER if stale else predict(m, at)

        result = self.step(
            f"{label} (stale epoch)" if stale else label, Actor.LEADER, lambda: call(epoch), model, normal
        )
        if stale:
            assert self.snap == before, f"G5: {label} with the stale epoch {epoch} changed the ledger"
        return result

    @staticmethod
    def choose(data: st.DataObject, items: list[Any], label: str) -> Any:
        """One of `items` (None if there is none), drawn the same way whatever they are: hypothesis
        replays prefixes of its choices, and a race or a clock may have left a replay's model
        otherwise; its choices must not depend on that (no precondition on the model either)."""
        index = data.draw(st.integers(0, 1 << 16), label=label)
        return items[index % len(items)] if items else None

    def pick(self, data: st.DataObject, *states: RunState) -> Key:
        """A run, most often one in `states` (otherwise any: a repeated token, a late report)."""
        keys = sorted(self.m.runs, key=lambda k: self.m.runs[k].id or 0)
        preferred = [k for k in keys if self.m.runs[k].state in states]
        prefer = data.draw(st.integers(0, 3), label="preferred") > 0
        if preferred and (prefer or len(preferred) == len(keys)):
            return self.choose(data, preferred, "run")
        return self.choose(data, keys, "run")

    def id_of(self, key: Key) -> int:
        run_id = self.m.runs[key].id
        assert run_id is not None
        return run_id

    def record_claims(self, answers: list[Any], keys: list[Key]) -> None:
        """G1: a run id is returned claimed once, ever; and what the executor gets is its run's."""
        for answer, key in zip(answers, keys, strict=True):
            if isinstance(answer, ClaimedRun):
                assert answer.id not in self.claimed, f"G1: run {answer.id} claimed twice"
                self.claimed.add(answer.id)
                policy = self.m.jobs[key[0]].policy
                assert (answer.job_id, answer.scheduled_for, answer.attempt) == key
                assert answer.concurrency_policy == policy and answer.exclusive == (policy != "allow")
                STATS["claimed"] += 1
            else:
                STATS[f"refused {answer.value}"] += 1

    def other_node(self, data: st.DataObject, owner: str | None) -> str:
        return self.choose(data, [n for n in (*NODES, INTRUDER) if n != owner], "not the owner")

    # -- the world ---------------------------------------------------------------------------

    @initialize(
        jobs=st.lists(
            st.tuples(
                st.sampled_from(POLICIES),
                st.sampled_from(MISFIRE_POLICIES),
                st.integers(0, 2),
                st.sampled_from((0.0, FAR_S)),
            ),
            min_size=2,
            max_size=3,
        )
    )
    def a_world(self, jobs: list[tuple[str, str, int, float]]) -> None:
        """2-3 jobs (concurrency policy, misfire policy, max_retries, retry backoff) and a leader."""

        async def build() -> dict[int, MJob]:
            await self.pool.execute(RESET)
            made = {}
            for policy, misfire, retries, backoff in jobs:
                name = f"sm-{next(_names)}"
                job_id = await self.pool.fetchval(INSERT_JOB, name, retries, backoff, policy, misfire, GRACE_S)
                made[job_id] = MJob(job_id, policy, misfire, retries, backoff)
            return made

        self.model = Model(self.run(build()))
        self.m.epoch = self.run(self.epochs.take("leader-1")).epoch
        self.snap = self.run(read(self.pool))
        assert not diffs(self.m, self.snap)
        # The leader's first write: each job's first three ticks, on time (queued, pushed).
        first: list[Tick] = [(j, tick(n), tick(n), None) for j in sorted(self.m.jobs) for n in (0, 1, 2)]
        cols = [[t[i] for t in first] for i in range(4)]
        revisions = [self.m.jobs[t[0]].revision for t in first]
        self.fenced(
            "first ticks",
            False,
            lambda e: self.ledger.write_ticks(e, *cols, revisions, expires_at=[expiry(t[2]) for t in first]),
            lambda m, _at: predict_write(m, first),
            lambda r, snap: (frozenset({r.id: r for r in snap.rows}[q.id].key for q in r.queued), r.skipped),
        )

    # -- the leader ---------------------------------------------------------------------------

    @precondition(lambda self: self.budget["elected"] > 0)
    @rule()
    def leader_elected(self) -> None:
        """A new leader: the epoch moves on; the old leader keeps the one it had, stale now. The new
        leader's sweep starts without the old one's memory of stranded runs."""

        def predict(m: Model, at: datetime) -> int:
            m.epoch += 1
            return m.epoch

        self.budget["elected"] -= 1
        self.step("elected", None, lambda: self.epochs.take("leader-n"), predict, lambda info, _s: info.epoch)
        self.stranded = frozenset()

    @rule(
        data=st.data(),
        stale=st.booleans(),
        ticks=st.lists(
            st.tuples(
                st.integers(0, TICKS - 1), st.sampled_from(sorted(LATENESS)), st.sampled_from((None, SKIP_MISFIRED))
            ),
            min_size=1,
            max_size=3,
        ),
    )
    def write_ticks(self, data: st.DataObject, stale: bool, ticks: list[tuple[int, str, str | None]]) -> None:
        """The leader writes ticks of one job or more (due on time or late, some skipped as misfired)."""
        at = now()
        batch: dict[tuple[int, datetime], Tick] = {}
        for n, lateness, reason in ticks:
            job_id = self.choose(data, sorted(self.m.jobs), "job")
            late = LATENESS[lateness]
            batch[(job_id, tick(n))] = (job_id, tick(n), tick(n) if late is None else at - late, reason)
        written = list(batch.values())
        revisions = [self.m.jobs[t[0]].revision for t in written]

        def call(epoch: int) -> Awaitable[Any]:
            return self.ledger.write_ticks(
                epoch, [t[0] for t in written], [t[1] for t in written], [t[2] for t in written],
                [t[3] for t in written], revisions, expires_at=[expiry(t[2]) for t in written],
            )  # fmt: skip

        def normal(result: Any, snap: Snapshot) -> Any:
            by_id = {r.id: r for r in snap.rows}
            for q in result.queued:  # what the leader pushes: the run as written
                row = by_id[q.id]
                assert (q.job_id, q.scheduled_for_ms, q.attempt, q.trigger) == (
                    row.job_id,
                    ms(row.scheduled_for),
                    1,
                    "schedule",
                )
                assert q.due_ms == ms(row.due_at)
            return frozenset(by_id[q.id].key for q in result.queued), result.skipped

        self.fenced("write ticks", stale, call, lambda m, _at: predict_write(m, written), normal)

    @rule(action=st.sampled_from(("take", "unmark", "unmark overdue")), stale=st.booleans(), data=st.data())
    def outbox(self, action: str, stale: bool, data: st.DataObject) -> None:
        """The outbox. take: every queued run not pushed in this epoch (all are due by UNTIL), marked
        pushed, but the misfired; unmark: an election, or Redis lost its data, puts every queued run
        back; unmark overdue: the watchdog puts back those pushed but unclaimed long past due."""
        at = now()
        if action == "take":

            def normal(result: Any, snap: Snapshot) -> Any:
                by_id = {r.id: r for r in snap.rows}
                for q in result[0]:
                    row = by_id[q.id]
                    assert (q.trigger, q.attempt, q.due_ms) == (row.trigger, row.attempt, ms(row.due_at))
                STATS["misfired"] += result[1]
                return [q.id for q in result[0]], result[1]

            take = self.ledger.take
            self.fenced("outbox take", stale, lambda e: take(e, at, UNTIL), lambda m, _t: predict_take(m, at), normal)
        elif action == "unmark":
            self.fenced("outbox unmark", stale, self.ledger.unmark, lambda m, _t: predict_unmark(m))
        else:
            ids = sorted(r.id for r in self.m.runs.values() if r.id is not None)
            drawn = data.draw(st.lists(st.integers(0, 1 << 16), max_size=2), label="leave out")
            leave_out = frozenset(ids[i % len(ids)] for i in drawn) if ids else frozenset()
            self.fenced(
                "outbox unmark overdue",
                stale,
                lambda e: self.ledger.unmark_overdue(e, OVERDUE_S, sorted(leave_out)),
                lambda m, at: predict_unmark_overdue(m, leave_out, at),
                lambda r, _s: frozenset(r),
            )

    @rule(action=st.sampled_from(("sweep", "reap", "sweep twice")), stale=st.booleans())
    def leader_pass(self, action: str, stale: bool) -> None:
        """A pass of the leader's watchdog: the waiting-runs sweep (once, or twice in a row as on
        consecutive passes), or the reaper."""
        if action == "reap":
            self.reap(stale)
            return
        for _ in range(1 + (action == "sweep twice")):
            self.sweep_waiters(stale)

    def sweep_waiters(self, stale: bool) -> None:
        """The leader's sweep. The design's promise to a waiting run with nothing running ahead of it
        and no earlier run waiting: the second sweep in a row that sees it so wakes it."""
        seen = self.stranded
        owed = [
            run.id
            for job_id in self.m.jobs
            if not self.m.running_exclusive(job_id) and self.m.keys(job_id, W)
            for run in [self.m.runs[self.m.keys(job_id, W)[0]]]
            if run.id in seen
        ]

        def normal(result: Any, _snap: Snapshot) -> Any:
            return result.skipped, result.woken, result.stranded

        result = self.fenced(
            "sweep",
            stale,
            lambda e: self.store.sweep_waiters(e, seen),
            lambda m, at: predict_sweep(m, seen, at),
            normal,
        )
        if result == NOT_LEADER:
            return
        rows = {r.id: r for r in self.snap.rows}  # type: ignore[union-attr]
        for run_id in owed:
            assert rows[run_id].state != "waiting", f"waiting run {run_id}, stranded for two sweeps, still waits"
            STATS["stranded run woken"] += 1
        STATS["stranded seen"] += len(result.stranded)
        self.stranded = result.stranded

    def reap(self, stale: bool) -> None:
        """The reaper: runs whose lease expired fail "executor lost" (and retry); pending runs past
        their grace expire."""

        def normal(result: Any, _snap: Snapshot) -> Any:
            STATS["lost"] += result.lost
            STATS["expired"] += result.expired
            STATS["released"] += result.released
            return result.lost, result.expired, result.retried, result.released

        self.fenced("reap", stale, lambda e: self.store.reap(e), predict_reap, normal)

    # -- executors ----------------------------------------------------------------------------

    @rule(
        data=st.data(), node=st.sampled_from(NODES), size=st.integers(1, 3), repeat=st.booleans(), bounded=st.booleans()
    )
    def claim(self, data: st.DataObject, node: str, size: int, repeat: bool, bounded: bool) -> None:
        """An executor claims the runs of its tokens: a batch, perhaps with a token repeated, perhaps
        with the tokens' ticks (the claim then reads their days only)."""
        keys = [self.pick(data, Q) for _ in range(size)]
        if repeat:
            keys.append(keys[0])
        ids = [self.id_of(k) for k in keys]
        ticks_ms = [ms(k[1]) for k in keys] if bounded else None
        answers = self.step(
            "claim",
            Actor.EXECUTOR,
            lambda: self.store.claim(ids, node, LEASE_S, ticks_ms),
            lambda m, at: predict_claim(m, keys, node, at),
            _claims,
        )
        self.record_claims(answers, keys)

    @rule(data=st.data(), same=st.booleans())
    def claims_race(self, data: st.DataObject, same: bool) -> None:
        """Two executors claim at once: the same run (a token read twice), or two runs (of one job, often)."""
        first = self.pick(data, Q)
        second = first if same else self.pick(data, Q)
        keys = [first, second]

        def claim(i: int) -> Callable[[], Awaitable[Any]]:
            return lambda: self.store.claim([self.id_of(keys[i])], NODES[i], LEASE_S)

        def predict(i: int) -> Predict:
            return lambda m, at: predict_claim(m, [keys[i]], NODES[i], at)

        def serial(expected: list[Any], actual: list[Any]) -> bool:
            # Both claimants may see the run queued, decide the same (wait, skip) and both answer that,
            # where one of them, serialized after the other, would have answered "not queued".
            for i in (0, 1):
                if expected[i] == actual[i]:
                    continue
                lenient = first == second and expected[i] == [Refused.NOT_QUEUED] and actual[i] == expected[1 - i]
                if not (lenient and isinstance(actual[i][0], Refused)):
                    return False
                STATS["race: both answered the refusal"] += 1
            return True

        answers = self.interleave(
            "claims race", Actor.EXECUTOR, [claim(0), claim(1)], [predict(0), predict(1)], [_claims, _claims], serial
        )
        for i in (0, 1):
            self.record_claims(answers[i], [keys[i]])
        assert sum(isinstance(a, ClaimedRun) for a in answers[0] + answers[1]) <= 1 or first != second

    @rule(data=st.data(), node=st.sampled_from(NODES), size=st.integers(1, 3), repeat=st.booleans())
    def reserve(self, data: st.DataObject, node: str, size: int, repeat: bool) -> None:
        """An executor reserves the runs of tokens that arrived ahead of their due time."""
        keys = [self.pick(data, Q) for _ in range(size)]
        if repeat:
            keys.append(keys[0])
        ids = [self.id_of(k) for k in keys]

        def normal(answers: Any, _snap: Snapshot) -> Any:
            return [None if a is None else ("reserved", a.id) for a in answers]

        answers = self.step(
            "reserve",
            Actor.EXECUTOR,
            lambda: self.store.reserve(ids, node, LEASE_S, [ms(k[1]) for k in keys]),
            lambda m, at: predict_reserve(m, keys, node, at),
            normal,
        )
        for answer, key in zip(answers, keys, strict=True):
            if answer is not None:
                assert answer.lease_until is not None and (answer.job_id, answer.scheduled_for, answer.attempt) == key
                STATS["reserved"] += 1

    @rule(data=st.data(), by_owner=st.integers(0, 3).map(bool), back=st.booleans())
    def start_or_give_back(self, data: st.DataObject, by_owner: bool, back: bool) -> None:
        """The executor that reserved a run starts it at its due instant, or gives it back (queued
        again); by a node that does not own it, or once the API took it back: nothing."""
        key = self.pick(data, V)
        owner = self.m.runs[key].node
        node = owner if by_owner and owner is not None else self.other_node(data, owner)
        run_id = self.id_of(key)

        def predict(m: Model, _at: datetime) -> set[int]:
            run = m.runs[key]
            if run.state is not V or run.node != node:
                return set()
            if back:
                run.state, run.node, run.lease = Q, None, None
            else:
                run.state = R  # its start: PostgreSQL's clock, adopted
            return {run_id}

        if back:
            self.step("give back", Actor.EXECUTOR, lambda: self.store.unreserve([run_id], node), predict)
        else:
            self.step(
                "started",
                Actor.EXECUTOR,
                lambda: self.store.start([run_id], node, [key[1]]),
                predict,
                lambda started, _snap: set(started),
            )

    def outcome(self, key: Key, node: str, state: str, delay: float | None, bounded: bool) -> Outcome:
        return Outcome(
            run_id=self.id_of(key),
            node_id=node,
            state=state,  # type: ignore[arg-type]
            error="boom" if state == "failed" else None,
            retry_delay_s=delay,
            scheduled_for=key[1] if bounded else None,
        )

    @rule(
        data=st.data(),
        by_owner=st.integers(0, 3).map(bool),
        state=st.sampled_from(("completed", "failed")),
        delay=st.sampled_from((None, 0.0, FAR_S)),
        bounded=st.booleans(),
        two=st.booleans(),
    )
    def finish(
        self, data: st.DataObject, by_owner: bool, state: str, delay: float | None, bounded: bool, two: bool
    ) -> None:
        """An executor reports runs' ends (with a retry or not); by their owner, or by a node that
        does not own them (a run taken away, a late report): that writes nothing."""
        picked = [
            (key, self.other_node(data, self.m.runs[key].node))
            for key in [self.pick(data, R, V) for _ in range(1 + two)]
        ]
        before = self.snap
        outcomes: list[FinishOutcome] = []
        for key, intruder in dict(picked).items():
            owner = self.m.runs[key].node
            node = owner if by_owner and owner is not None else intruder
            outcomes.append((key, node, state, "boom" if state == "failed" else None, delay))
        effective = any(self.m.runs[k].state is R and self.m.runs[k].node == n for k, n, *_ in outcomes)
        self.step(
            "finish" if effective else "finish (not the owner's, or not running)",
            Actor.EXECUTOR,
            lambda: self.store.finish([self.outcome(k, n, s, d, bounded) for k, n, s, _, d in outcomes]),
            lambda m, at: predict_finish(m, outcomes, at),
            _finished,
        )
        if not effective:
            assert self.snap == before, "a finish by a node that does not own the run wrote something"

    @rule(data=st.data(), state=st.sampled_from(("completed", "failed")))
    def finish_races_a_claim(self, data: st.DataObject, state: str) -> None:
        """A run's end and the claim of another run (of its job, often) at once: the claim either
        waits and is woken by the end, or sees the run ended and claims (no lost wakeup)."""
        running = self.choose(data, sorted(k for k, r in self.m.runs.items() if r.state in (R, V)), "ends")
        queued = self.choose(data, sorted(k for k, r in self.m.runs.items() if r.state is Q), "claimed")
        if running is None or queued is None:
            return
        owner = self.m.runs[running].node
        assert owner is not None
        claimer = NODES[1] if owner == NODES[0] else NODES[0]
        ended: list[FinishOutcome] = [(running, owner, state, "boom" if state == "failed" else None, None)]
        outcome = self.outcome(running, owner, state, None, False)
        answers = self.interleave(
            "finish races a claim",
            Actor.EXECUTOR,
            [
                lambda: self.store.finish([outcome]),
                lambda: self.store.claim([self.id_of(queued)], claimer, LEASE_S),
            ],
            [lambda m, at: predict_finish(m, ended, at), lambda m, at: predict_claim(m, [queued], claimer, at)],
            [_finished, _claims],
            extra=lambda at: wait_recorded_after_the_end(self.m, ended, queued, claimer, at),
        )
        self.record_claims(answers[1], [queued])

    @rule(data=st.data(), by_owner=st.integers(0, 3).map(bool))
    def heartbeat(self, data: st.DataObject, by_owner: bool) -> None:
        """An executor extends its leases (only those it still owns)."""
        key = self.pick(data, R, V)
        owner = self.m.runs[key].node
        intruder = self.other_node(data, owner)
        node = owner if by_owner and owner is not None else intruder

        def predict(m: Model, _at: datetime) -> dict[int, str | None]:
            run = m.runs[key]
            if run.state in (R, V) and run.node == node:
                run.lease = "live"
                return {self.id_of(key): run.cancel_by}  # the beat tells the owner of a cancel request
            return {}

        self.step("heartbeat", Actor.EXECUTOR, lambda: self.store.beat([self.id_of(key)], node, LEASE_S), predict)

    @rule(data=st.data(), by_owner=st.integers(0, 3).map(bool))
    def stopped(self, data: st.DataObject, by_owner: bool) -> None:
        """An executor that was asked to cancel its run records it cancelled (never retried; its end
        wakes the runs waiting behind it like any end); by a node that does not own it: nothing."""
        asked = sorted(k for k, r in self.m.runs.items() if r.state in (R, V) and r.cancel_by is not None)
        # Every value drawn, whatever the model holds (see choose): a replay whose race left no run
        # asked, or the run with no owner, must draw what the first run drew.
        asked_key, any_key = self.choose(data, asked, "run asked to stop"), self.pick(data, R, V)
        key = asked_key or any_key
        owner = self.m.runs[key].node
        intruder = self.other_node(data, owner)
        node = owner if by_owner and owner is not None else intruder
        error = lifecycle.cancelled_by(CANCELLER)
        outcome = msgspec.structs.replace(self.outcome(key, node, "cancelled", None, False), error=error)
        ended: list[FinishOutcome] = [(key, node, "cancelled", error, None)]
        self.step(
            "stopped",
            Actor.EXECUTOR,
            lambda: self.store.finish([outcome]),
            lambda m, at: predict_finish(m, ended, at),
            _finished,
        )

    # -- time passes (the machine's own writes: no transition) --------------------------------

    @rule(data=st.data())
    def lease_expires(self, data: st.DataObject) -> None:
        """A reserved or running run's executor stops heartbeating: its lease runs out."""
        key = self.choose(data, sorted(k for k, r in self.m.runs.items() if r.state in (R, V)), "run")
        if key is None:
            return
        sql = (
            "UPDATE runs SET lease_until = now() - interval '1 second'"
            " WHERE id = $1 AND state IN ('reserved', 'running')"
        )

        def predict(m: Model, _at: datetime) -> None:
            m.runs[key].lease = "expired"

        self.step("lease expires", None, lambda: self.pool.execute(sql, self.id_of(key)), predict, lambda _r, _s: None)

    @rule(data=st.data(), lateness=st.sampled_from(("late", "very_late")))
    def time_passes(self, data: st.DataObject, lateness: str) -> None:
        """A pending run's due time lies in the past now: late within its grace, or beyond it."""
        pending = sorted(k for k, r in self.m.runs.items() if r.state in lifecycle.PENDING)
        key = self.choose(data, pending, "run")
        if key is None:
            return
        late = LATENESS[lateness]
        assert late is not None
        due = now() - late
        # As if written that long ago: its stamped expiry with it.
        sql = "UPDATE runs SET due_at = $2, expires_at = $3 WHERE id = $1 AND state IN ('queued', 'waiting')"

        def predict(m: Model, _at: datetime) -> None:
            m.runs[key].due_at = due

        self.step(
            "time passes",
            None,
            lambda: self.pool.execute(sql, self.id_of(key), due, lifecycle.expiry(due, GRACE_S)),
            predict,
            lambda _r, _s: None,
        )

    # -- the API ------------------------------------------------------------------------------

    @precondition(lambda self: self.budget["status"] > 0)
    @rule(data=st.data())
    def pause_or_resume(self, data: st.DataObject) -> None:
        """A job paused (its ticks written ahead are handed over: skipped) or resumed."""
        self.budget["status"] -= 1
        job_id = self.choose(data, sorted(self.m.jobs), "job")
        status = "paused" if self.m.jobs[job_id].status == "active" else "active"
        self.step(
            status,
            Actor.API,
            lambda: self.job_store.set_status(job_id, status),
            lambda m, at: predict_set_status(m, job_id, status, at),
            lambda job, _s: job.status,
            transitions=2,  # a reserved run taken back (queued), then handed over (skipped) if written ahead
        )

    @precondition(lambda self: self.budget["trigger"] > 0)
    @rule(data=st.data())
    def trigger(self, data: st.DataObject) -> None:
        """A manual run: queued, due now (its tick is now)."""
        self.budget["trigger"] -= 1
        job_id = self.choose(data, sorted(self.m.jobs), "job")
        t0 = now()
        run = self.run(self.job_store.trigger(job_id))
        t1 = now()
        assert t0 - timedelta(seconds=1) <= run.scheduled_for <= t1 + timedelta(seconds=1)
        m = self.m.copy()
        m.runs[(job_id, run.scheduled_for, 1)] = MRun("manual", Q, run.due_at)
        self.settle("trigger", Actor.API, [(m, None)], None, self.run(read(self.pool)))

    @precondition(lambda self: self.budget["cancel"] > 0)
    @rule(data=st.data(), other=st.sampled_from(("claim", "finish")))
    def cancel_races(self, data: st.DataObject, other: str) -> None:
        """The API cancels a run while an executor claims a queued run (the same one, or another of
        its job, often) or reports a running run's end (the same one, often): the outcome is the
        two serialized in some order."""
        self.budget["cancel"] -= 1
        key = self.pick(data, Q, W, V, R)
        canceller = CancelStore(self.pool)

        async def cancel() -> Any:
            try:
                done = await canceller.cancel(self.id_of(key), actor=CANCELLER)
            except Conflict:
                return "Conflict"
            return ("now" if done.ended else "request", done.was)

        calls: list[Callable[[], Awaitable[Any]]] = [cancel]
        predicts: list[Predict] = [lambda m, _at: predict_cancel(m, key)]
        normals: list[Normal] = [lambda r, _s: r]
        extra = None
        if other == "claim":
            queued = self.pick(data, Q)
            node = NODES[data.draw(st.integers(0, 1), label="claimer")]
            calls.append(lambda: self.store.claim([self.id_of(queued)], node, LEASE_S))
            predicts.append(lambda m, at: predict_claim(m, [queued], node, at))
            normals.append(_claims)
        else:
            running = self.pick(data, R, V)
            owner = self.m.runs[running].node or NODES[0]
            ended: list[FinishOutcome] = [(running, owner, "completed", None, None)]
            outcome = self.outcome(running, owner, "completed", None, False)
            calls.append(lambda: self.store.finish([outcome]))
            predicts.append(lambda m, at: predict_finish(m, ended, at))
            normals.append(_finished)

            def extra(at: datetime) -> list[tuple[Model, list[Any]]]:
                return wake_lost_to_the_cancel(self.m, key, ended, at)

        def serial(expected: list[Any], actual: list[Any]) -> bool:
            # A claim decides on facts it reads unlocked, then applies its refusal (skip, wait) with a
            # statement guarded by `queued`: when the cancel came between, that statement changes
            # nothing but the claim still answers its refusal, where serialized after the cancel it
            # would have answered "not queued" (as in claims_race). The ledger is the cancel's.
            if expected == actual:
                return True
            refused = len(actual[1]) == 1 and isinstance(actual[1][0], Refused)
            lenient = other == "claim" and expected[0] == actual[0] and expected[1] == [Refused.NOT_QUEUED] and refused
            if lenient:
                STATS["race: the claim answered its refusal"] += 1
            return lenient

        answers = self.interleave(
            f"cancel races a {other}", frozenset({Actor.API, Actor.EXECUTOR}), calls, predicts, normals, serial, extra
        )
        if other == "claim":
            self.record_claims(answers[1], [queued])

    @precondition(lambda self: self.budget["cancel"] > 0)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """The API cancels a run: pending ones at once, running ones through their executor, ended
        ones refused."""
        self.budget["cancel"] -= 1
        key = self.pick(data, Q, W, V, R)
        canceller = CancelStore(self.pool)

        async def call() -> Any:
            try:
                done = await canceller.cancel(self.id_of(key), actor=CANCELLER)
            except Conflict:
                return "Conflict"
            return ("now" if done.ended else "request", done.was)

        self.step("cancel", Actor.API, call, lambda m, _at: predict_cancel(m, key))

    # -- invariants, after every step --------------------------------------------------------

    @invariant()
    def g1_one_run_per_tick_identity(self) -> None:
        if self.snap is None:
            return
        keys = [r.key for r in self.snap.rows]
        assert len(keys) == len(set(keys)), "G1: two runs of one tick identity"
        if self.prev is not None:
            before = self.prev.runs
            for key, row in self.snap.runs.items():
                assert key not in before or before[key].id == row.id, f"G1: {key} is another run now"

    @invariant()
    def g3_one_running_run_per_exclusive_job(self) -> None:
        if self.snap is None:
            return
        running = [r for r in self.snap.rows if r.state in ("reserved", "running")]  # reserved: its place taken
        for job_id, job in self.m.jobs.items():
            mine = [r.id for r in running if r.job_id == job_id]
            if job.policy != "allow":
                assert len(mine) <= 1, f"G3: job {job_id} ({job.policy}) runs {mine} at once"
        for row in running:
            assert row.exclusive == (self.m.jobs[row.job_id].policy != "allow")
        assert self.snap.exclusive == {(r.job_id, r.id) for r in running if r.exclusive}, "runs_running_exclusive"

    @invariant()
    def every_change_is_a_lifecycle_transition(self) -> None:
        if self.prev is None or self.snap is None:
            return
        before, after = self.prev.runs, self.snap.runs
        for key in set(before) | set(after):
            error = change_error(before.get(key), after.get(key), self.actor, self.steps)
            assert error is None, f"{key}: {error}"

    @invariant()
    def rows_are_consistent(self) -> None:
        if self.snap is None:
            return
        for row in self.snap.rows:
            state = RunState(row.state)
            assert (row.finished_at is None) == (state not in TERMINAL), row
            if state is R:
                assert row.node_id is not None and row.started_at is not None and row.lease is not None, row
            elif state is V:  # owned and leased, not started yet
                assert row.node_id is not None and row.started_at is None and row.lease is not None, row
            else:
                assert row.lease is None, row
            if state is W:  # waits behind its job's running run: only for policies that wait, holding no token
                assert self.m.jobs[row.job_id].policy in ("forbid", "buffer_one", "buffer_all"), row
                assert row.pushed_epoch is None and row.node_id is None, row

    @invariant()
    def the_model_agrees_with_the_database(self) -> None:
        if self.snap is not None:
            assert not diffs(self.m, self.snap)


SETTINGS = hypothesis_settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@pytest.mark.timeout(180)
def test_lifecycle_state_machine(database_url: str) -> None:
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(connect(database_url, min_size=2, max_size=4))
    LifecycleMachine.world = World(loop, pool)
    STATS.clear()
    try:
        run_state_machine_as_test(LifecycleMachine, settings=SETTINGS)
    finally:
        LifecycleMachine.world = None
        loop.run_until_complete(pool.close())
        loop.close()
    print("lifecycle state machine:", dict(sorted(STATS.items())))


# --- what the machine found, shrunk to its steps ---------------------------------------------------


async def test_buffer_one_batch_counts_a_run_already_waiting(pg_pool: asyncpg.Pool) -> None:
    """buffer_one keeps one run waiting and skips the later ones (lifecycle.overlap, by
    Candidate.earlier_waiting: the job's runs waiting with an earlier tick). A run left waiting with
    nothing ahead of it (the run woken before it expired unclaimed) still counts: a claim of tick 3,
    then of tick 4, skips tick 4 (BUFFER_FULL). Claimed in one batch, tick 4 waits too: two runs
    wait behind tick 3, and tick 4 runs after all unless the leader's sweep skips it first."""
    store = RunStore(pg_pool)
    await set_epoch(pg_pool, 1)
    job = await insert_job(pg_pool, concurrency_policy="buffer_one")
    t = [await insert_run(pg_pool, job, tick(n)) for n in range(5)]
    assert isinstance((await store.claim([t[0].run_id], "a", LEASE_S))[0], ClaimedRun)
    assert await store.claim([t[2].run_id], "b", LEASE_S) == [Refused.WAIT]
    assert await store.claim([t[1].run_id], "b", LEASE_S) == [Refused.WAIT]  # no waiting run before it
    assert (await store.finish([Outcome(run_id=t[0].run_id, node_id="a", state="completed")])).woken == 1
    await pg_pool.execute(LATE_BEYOND_GRACE, t[1].run_id)
    assert (await store.reap(1)).expired == 1  # tick 1 expired unclaimed: tick 2 waits with nothing ahead
    first, second = await store.claim([t[3].run_id, t[4].run_id], "c", LEASE_S)
    assert isinstance(first, ClaimedRun)
    assert second is Refused.BUFFER_FULL, [(r.scheduled_for, r.state) for r in await runs_of(pg_pool, job)]


async def test_a_stranded_waiting_run_is_woken_by_the_second_sweep(pg_pool: asyncpg.Pool) -> None:
    """The sweep's promise, which the machine reaches only now and then (it needs two runs waiting,
    the first woken and then ended unclaimed): a waiting run with nothing ahead of it is left alone
    by the sweep that first sees it so (a wake may be on its way) and woken by the next one."""
    store = RunStore(pg_pool)
    await set_epoch(pg_pool, 1)
    job = await insert_job(pg_pool, concurrency_policy="buffer_all")
    t = [await insert_run(pg_pool, job, tick(n)) for n in range(3)]
    assert isinstance((await store.claim([t[0].run_id], "a", LEASE_S))[0], ClaimedRun)
    assert await store.claim([t[1].run_id, t[2].run_id], "b", LEASE_S) == [Refused.WAIT, Refused.WAIT]
    assert (await store.finish([Outcome(run_id=t[0].run_id, node_id="a", state="completed")])).woken == 1
    await pg_pool.execute(LATE_BEYOND_GRACE, t[1].run_id)
    assert (await store.reap(1)).expired == 1  # the woken run expired unclaimed: tick 2 has nothing ahead
    first = await store.sweep_waiters(1)
    assert (first.woken, first.stranded) == (0, frozenset({t[2].run_id}))
    second = await store.sweep_waiters(1, first.stranded)
    assert second.woken == 1
    assert [r.state for r in await runs_of(pg_pool, job)] == ["completed", "skipped", "queued"]
