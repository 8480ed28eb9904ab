"""The run lifecycle: the states of a run, the transitions between them, and every decision.

Pure: no I/O, no clock (`now` is a parameter). The store applies a transition with one
conditional statement guarded by its from-state (and by the epoch or the owning node where
`TRANSITIONS` says so); it reads the facts a decision needs, calls a function here, and writes
what it returns. The Promela model (`tests/model/lifecycle.pml`) names the same states and events.

    queued ──claimed──▶ running ──completed──▶ completed ──▶ chain runs of its child jobs queued
      │ ▲ ▲ │  ▲           ▲    └──failed──────▶ failed ───(a retry left)──▶ next attempt queued
      │ │ │ │  │           └started (at its due instant, before the work)
      │ │ │ │  └unreserved (its executor) | taken_back (API: its job changed) | released (reaper)─┐
      │ │ │ └reserved──▶ reserved (ahead of due: owned and leased, not started) ──────────────────┘
      │ │ woken             ├──replaced───────▶ failed "replaced"
      │ │                   └──cancelled (API) ──▶ cancelled "cancelled by …"
      ├─waited──▶ waiting (behind its job's running run: no token, no lock, no slot)
      ├─overlapped / misfired / expired / handed_over ──▶ skipped (the reason)
      └─cancelled (API; queued, waiting or reserved) ──▶ cancelled "cancelled by …"
    running ──lost (reaper)──▶ failed "executor lost";  running ──cancel_requested (API) ··· stopped ──▶ cancelled
    failed | skipped (ended, not completed) ──triggered (API: "retry this run")──▶ next attempt queued

A run whose token an executor holds ahead of its due time (the push lead) is reserved then, when
`claims_at_once` holds: owned, leased and holding its exclusive job's place (G3) before it is due,
with its job's definition read then, so that at its due instant its executor only starts it: one
short statement (started: reserved -> running, guarded by the state and the owner) instead of a
claim that reads the job and decides. A reserved run has not started, and nothing starts it but
that statement, so the API may take it back until then: a change of its job (edit, pause, a rule,
the breaker) gives it back queued (taken_back: then handed over as any tick written ahead, and
claimed at its instant with the job as changed), a cancel ends it at once, a deletion deletes it.
Its executor's start then finds it not reserved and claims it as a queued run (or finds it gone).
An executor that cannot start it at its instant (drained, its lease or grace run out) gives it
back (unreserved); one that died holding it leaves it to the reaper, which, its lease over (its
due time plus the lease), puts it back in the outbox (released: it never started, so nothing is
lost and nothing runs twice), and it is claimed as any queued run, or expires.

A run that ends its tick (completed, failed with no retry left, cancelled) queues the chain runs
its children's edges fire on (cronos.chains), or brings its outcome to their joins.

A queued run is in the outbox until the leader pushes its token (`pushed_epoch` set to the
leader's epoch); election, Redis losing its data and the watchdog only clear that mark again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from cronos import chains
from cronos.models import (
    FAIL_EXECUTOR_LOST,
    FAIL_REPLACED,
    SKIP_BUFFER_FULL,
    SKIP_EXPIRED,
    SKIP_JOB_INACTIVE,
    SKIP_MISFIRED,
    SKIP_OVERLAP,
    ChainOn,
    ConcurrencyPolicy,
    MisfirePolicy,
    RunState,
)

TERMINAL = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.SKIPPED, RunState.CANCELLED})
PENDING = frozenset({RunState.QUEUED, RunState.WAITING})  # not started: expiry and misfire apply
# An executor owns it and its lease says it is alive: the reaper, the heartbeat and G3 treat both alike.
OWNED = frozenset({RunState.RESERVED, RunState.RUNNING})
NOT_STARTED = PENDING | {RunState.RESERVED}  # the API may still end it (or, reserved, take it back)


class Actor(StrEnum):
    LEADER = "leader"
    EXECUTOR = "executor"
    API = "api"


class Fence(StrEnum):
    """What a transition's statement checks besides its from-state."""

    EPOCH = "epoch"  # the writer's leader epoch is still current (EPOCH_GUARD, same transaction)
    OWNER = "owner"  # the run's node_id is the writer's (a run taken away is not reported)
    STATE = "state"  # the from-state alone: a repeated event finds the run moved on and does nothing
    JOB = "job"  # the job's row lock (the API's change of the job)


class Event(StrEnum):
    WRITTEN = "written"  # a tick of the schedule
    TRIGGERED = "triggered"  # a manual run; also "retry this run" (`rerun`: another attempt of a tick)
    RETRIED = "retried"  # the next attempt of a failed run
    CHAINED = "chained"  # a run of a child job after a run of a parent (or a join of its parents)
    PUSHED = "pushed"  # its token went out (stays queued)
    UNPUSHED = "unpushed"  # back in the outbox: election, Redis lost its data, watchdog
    CLAIMED = "claimed"
    RESERVED = "reserved"  # claimed ahead of its due time (the push lead) by the executor holding its token
    STARTED = "started"  # that executor starts it at its due instant (recorded before the work begins)
    UNRESERVED = "unreserved"  # that executor could not start it at its instant: queued again
    TAKEN_BACK = "taken_back"  # the API changed its job before it started: queued again, then handed over
    RELEASED = "released"  # its lease ran out before it started (its executor is gone): back in the outbox
    WAITED = "waited"
    WOKEN = "woken"
    OVERLAPPED = "overlapped"  # the concurrency policy refused it
    MISFIRED = "misfired"  # late beyond its grace, and the misfire policy does not run it
    EXPIRED = "expired"  # still pending past its grace
    HANDED_OVER = "handed_over"  # written ahead; its job was paused or given a schedule without it
    COMPLETED = "completed"
    FAILED = "failed"
    LOST = "lost"  # its lease expired: the executor is gone
    REPLACED = "replaced"  # `replace`: a newer run of the job took over
    CANCELLED = "cancelled"  # the API ends a run that has not started
    CANCEL_REQUESTED = "cancel_requested"  # the API asks a running run's executor to stop it (stays running)
    STOPPED = "stopped"  # that executor stopped the run (or the reaper, when that executor is gone)


@dataclass(frozen=True, slots=True)
class Transition:
    event: Event
    sources: frozenset[RunState]  # empty: the run is created by this transition
    target: RunState
    actors: frozenset[Actor]
    fence: Fence
    reason: str | None = None  # the skip or failure reason it records


def _t(
    event: Event, sources: str, target: RunState, actors: str, fence: Fence, reason: str | None = None
) -> Transition:
    return Transition(
        event,
        frozenset(RunState(s) for s in sources.split()),
        target,
        frozenset(Actor(a) for a in actors.split()),
        fence,
        reason,
    )


Q, W, R, V = RunState.QUEUED, RunState.WAITING, RunState.RUNNING, RunState.RESERVED
TRANSITIONS: tuple[Transition, ...] = (
    _t(Event.WRITTEN, "", Q, "leader", Fence.EPOCH),
    _t(Event.TRIGGERED, "", Q, "api", Fence.STATE),
    _t(Event.RETRIED, "", Q, "executor leader", Fence.OWNER),  # with the failure, in its transaction
    _t(Event.CHAINED, "", Q, "executor leader", Fence.OWNER),  # with the parent's end; a join's at its timeout
    _t(Event.PUSHED, "queued", Q, "leader", Fence.EPOCH),
    _t(Event.UNPUSHED, "queued", Q, "leader", Fence.EPOCH),
    _t(Event.CLAIMED, "queued", R, "executor", Fence.STATE),
    _t(Event.RESERVED, "queued", V, "executor", Fence.STATE),
    _t(Event.STARTED, "reserved", R, "executor", Fence.OWNER),
    _t(Event.UNRESERVED, "reserved", Q, "executor", Fence.OWNER),
    _t(Event.TAKEN_BACK, "reserved", Q, "api", Fence.JOB),
    _t(Event.RELEASED, "reserved", Q, "leader", Fence.EPOCH),
    _t(Event.WAITED, "queued", W, "api executor", Fence.STATE),  # api: a backfill's runs behind its first
    _t(Event.WOKEN, "waiting", Q, "api executor leader", Fence.STATE),  # api: behind a run it cancelled
    _t(Event.OVERLAPPED, "queued waiting", RunState.SKIPPED, "executor leader", Fence.STATE, SKIP_OVERLAP),
    _t(Event.MISFIRED, "queued", RunState.SKIPPED, "leader", Fence.EPOCH, SKIP_MISFIRED),
    _t(Event.EXPIRED, "queued waiting", RunState.SKIPPED, "leader executor", Fence.STATE, SKIP_EXPIRED),
    _t(Event.HANDED_OVER, "queued", RunState.SKIPPED, "api", Fence.JOB, SKIP_JOB_INACTIVE),
    _t(Event.COMPLETED, "running", RunState.COMPLETED, "executor", Fence.OWNER),
    _t(Event.FAILED, "running", RunState.FAILED, "executor", Fence.OWNER),
    _t(Event.LOST, "running", RunState.FAILED, "leader", Fence.EPOCH, FAIL_EXECUTOR_LOST),
    _t(Event.REPLACED, "reserved running", RunState.FAILED, "executor", Fence.STATE, FAIL_REPLACED),
    _t(Event.CANCELLED, "queued waiting reserved", RunState.CANCELLED, "api", Fence.STATE),
    _t(Event.CANCEL_REQUESTED, "running", R, "api", Fence.STATE),  # recorded beside the run, not in it
    _t(Event.STOPPED, "running", RunState.CANCELLED, "executor leader", Fence.OWNER),  # leader: reaped, asked
)
BY_EVENT = {t.event: t for t in TRANSITIONS}
# OVERLAPPED also records SKIP_BUFFER_FULL (buffer_one), HANDED_OVER also SKIP_SCHEDULE_CHANGED.


class IllegalTransition(Exception):
    pass


def transition(event: Event, source: RunState | None) -> Transition:
    """The transition `event` makes from `source` (None: a new run); IllegalTransition if none."""
    t = BY_EVENT[event]
    if (source is None and t.sources) or (source is not None and source not in t.sources):
        raise IllegalTransition(f"{event} cannot happen to a run that is {source or 'not written yet'}")
    return t


# --- cancel: ended at once, or asked of the executor running it ------------------------------


class Cancel(StrEnum):
    """What a cancel request does to a run, by the state it is in."""

    NOW = "now"  # queued, waiting or reserved (not started): ended `cancelled` at once (Event.CANCELLED)
    REQUEST = "request"  # running: recorded; its executor signals the work, forces it after a grace
    ENDED = "ended"  # over already: nothing to cancel (the API's 409)


def cancel(state: RunState) -> Cancel:
    if state in NOT_STARTED:
        return Cancel.NOW
    if state is RunState.RUNNING:
        return Cancel.REQUEST
    return Cancel.ENDED


def cancelled_by(actor: str) -> str:
    """The error a cancelled run records: who cancelled it (a token's name, `local`, ...)."""
    return f"cancelled by {actor}"


def lost(cancel_by: str | None) -> tuple[RunState, str, bool]:
    """A running run whose lease expired (its executor is gone): failed "executor lost" and retried
    as its job allows (Event.LOST); or, when someone had asked to cancel it, cancelled and never
    retried (Event.STOPPED: the cancel holds though nobody was left to honour it). (state, error,
    whether it may be retried.)"""
    if cancel_by is None:
        return RunState.FAILED, FAIL_EXECUTOR_LOST, True
    return RunState.CANCELLED, f"{cancelled_by(cancel_by)} ({FAIL_EXECUTOR_LOST})", False


# --- reserve: claimed ahead of its due time, only started at it ---------------------------------
# A queued run whose token arrived ahead of its due time is reserved then when `claims_at_once`
# holds for it (nothing then needs deciding at its instant); the others are claimed at their
# instant, as the concurrency policy decides then.

# How much sooner than its lease's end (or its grace's) a reserved run must start: the error of
# the executor's estimate of PostgreSQL's clock (cronos.clock) stays well under it.
START_MARGIN_S = 1.0


def startable(now_s: float, lease_until_s: float, expires_s: float | None) -> bool:
    """A reserved run its executor starts at its due instant (unix times by PostgreSQL's clock, as
    the executor estimates it): its lease still holds, so the reaper has not released it, and its
    grace has not run out (G7), each by START_MARGIN_S. Otherwise the executor gives it back
    (Event.UNRESERVED) and claims it as a queued run. Event.STARTED's statement checks the run is
    still reserved by this executor (the API may have taken it back) before the work begins."""
    if now_s > lease_until_s - START_MARGIN_S:
        return False
    return expires_s is None or now_s <= expires_s - START_MARGIN_S


# --- misfire: ticks late beyond their grace -------------------------------------------------

# Lateness up to which a tick counts as on time whatever its grace (a busy loop, a slow commit).
ON_TIME_S = 1.0


def grace(grace_s: float) -> timedelta:
    """A job's misfire grace as runs are stamped with it: at least ON_TIME_S."""
    return timedelta(seconds=max(grace_s, ON_TIME_S))


def expiry(due_at: datetime, grace_s: float) -> datetime:
    """The instant a run due at `due_at` is late beyond its misfire grace (at least ON_TIME_S):
    stamped on the run once, when it is created (`runs.expires_at`, its token's `expires_ms`).
    Every judgement of lateness compares an instant with it (`expired`), so a grace changed
    afterwards applies to the runs created after the change, and no statement recomputes it."""
    return due_at + grace(grace_s)


def expired(expires_at: datetime, now: datetime) -> bool:
    """Late beyond its grace at `now`: a run still pending then never starts (the reaper's pass
    ends it, and so does a claim that comes later: a token held through an outage by a paused
    executor), and a tick not written yet is judged by its misfire policy. A stale tick its
    policy keeps is due anew when it is pushed again (`due_anew`)."""
    return now >= expires_at


def late_beyond_grace(due_at: datetime, now: datetime, grace_s: float) -> bool:
    """A tick (or a run created from one) due at `due_at`, late beyond its grace at `now`."""
    return expired(expiry(due_at, grace_s), now)


def due_anew(due_at: datetime, expires_at: datetime, now: datetime) -> datetime:
    """The expiry of a stale tick its misfire policy still runs, made due anew at `now`: its
    stamped grace (`expires_at - due_at`) from then, whatever its job's grace is now."""
    return now + (expires_at - due_at)


def misfire(
    policy: MisfirePolicy, ticks: Sequence[datetime], now: datetime, grace_s: float, *, complete: bool = True
) -> list[bool]:
    """Whether each tick (ascending, all <= now) runs. A tick late by at most its grace runs,
    late, whatever the policy (G7); beyond it `skip` skips each, `run_all` runs each, and
    `run_once` runs one for the lot: the newest, unless a tick within the grace follows (that
    one is the run). `complete=False`: more due ticks follow, so none of these is the newest."""
    runs = []
    newest = len(ticks) - 1
    for index, tick in enumerate(ticks):
        if not late_beyond_grace(tick, now, grace_s) or policy == "run_all":
            runs.append(True)
        else:
            runs.append(policy == "run_once" and complete and index == newest)
    return runs


def one_pending(misfire: MisfirePolicy, concurrency: ConcurrencyPolicy) -> bool:
    """Whether a job holds one pending run at most. Under the default policies (`run_once`,
    `forbid`) a tick due while an earlier run of its job has not started though overdue (queued
    or waiting, due before `overdue_before`: more than a claim or a catch-up takes) and has not
    expired at the leader's round (`expired`) is written skipped SKIP_PENDING, as a misfired tick
    is: that run stands for it, as `run_once` runs one run for a lot and `forbid` never two at once.
    Offered more than the cluster runs, each such
    job keeps one token in its stream (the stream is as long as the jobs are many, not as the
    backlog is old) and the runs go round the jobs in due order (G8), instead of a backlog growing
    until every run expires. A run past its grace holds nothing back: the tick after it runs.
    Other policies keep every tick (`run_all`: each runs; the buffers, `allow`, `replace`: as asked)."""
    return misfire == "run_once" and concurrency == "forbid"


def overdue_before(now: datetime) -> datetime:
    """The due time before which a run not started at `now` is overdue: later than a busy claim
    takes, and than a failover's catch-up takes to run its ticks in turn (LATE_START_S: those
    all run, G7)."""
    return now - timedelta(seconds=LATE_START_S)


def stale_tick_runs(policy: MisfirePolicy, *, newest_written: bool) -> bool:
    """A scheduled tick written earlier, now late beyond its grace, about to be pushed (again):
    whether it still runs. Under `run_once` only the job's newest written tick stands for the
    lot (the leader writes its due ticks first, so a catch-up's own newest is newer)."""
    return policy == "run_all" or (policy == "run_once" and newest_written)


def jitter_s(job_id: int, scheduled_for_ms: int, max_jitter_s: float) -> float:
    """A deterministic delay in [0, max_jitter_s) for a tick: every leader computes the same."""
    if max_jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{job_id}:{scheduled_for_ms}".encode(), digest_size=8).digest()
    return int(int.from_bytes(digest, "big") / 2**64 * max_jitter_s * 1000) / 1000  # whole ms


def on_time_at(job_id: int, scheduled_for: datetime, max_jitter_s: float) -> datetime:
    """When a tick is due if nothing is late: its instant plus its jitter."""
    return scheduled_for + timedelta(seconds=jitter_s(job_id, int(scheduled_for.timestamp() * 1000), max_jitter_s))


# --- overlap: a run of a job that has another running ---------------------------------------

# A run woken at the end of its forbid wait starts up to 2 * ON_TIME_S late (its wait, stretched
# by its predecessor's own lateness: `forbid_deadline`); one that started later than this was late
# for another reason (a failover, an outage, a retry's backoff, a paced catch-up), and the ticks
# behind it wait for it instead of being skipped.
LATE_START_S = 3 * ON_TIME_S


class Overlap(StrEnum):
    CLAIM = "claim"
    WAIT = "wait"
    SKIP = "skip"  # SKIP_OVERLAP
    BUFFER_FULL = "buffer_full"  # SKIP_BUFFER_FULL
    REPLACE = "replace"  # end the running one (FAIL_REPLACED), then claim


class Refused(StrEnum):
    """Why a claim did not start its run: the claim's answer besides the run it starts, one type
    from the store's claim to the executor's count of how its tokens ended."""

    NOT_QUEUED = "not_queued"  # already claimed, waiting, finished or gone (a repeated token)
    OVERLAP = "skipped"  # ended skipped SKIP_OVERLAP: the job's previous run is still running
    BUFFER_FULL = "buffer_full"  # ended skipped SKIP_BUFFER_FULL (buffer_one: another run waits)
    WAIT = "waiting"  # now waiting: its predecessor's end wakes it (a token of its own then)
    WAIT_GROUP = "waiting_group"  # now waiting for a slot of its job's concurrency group: a freed slot wakes it
    EXPIRED = "expired"  # ended skipped SKIP_EXPIRED: claimed past its misfire grace (a token held through an outage)


# The claim's answer to each refusal of the concurrency policy; the skip reason of each that ends its run.
REFUSALS = {Overlap.SKIP: Refused.OVERLAP, Overlap.BUFFER_FULL: Refused.BUFFER_FULL, Overlap.WAIT: Refused.WAIT}
SKIP_REASONS = {Refused.OVERLAP: SKIP_OVERLAP, Refused.BUFFER_FULL: SKIP_BUFFER_FULL, Refused.EXPIRED: SKIP_EXPIRED}
OVERLAP_REASONS = {d: SKIP_REASONS[r] for d, r in REFUSALS.items() if r in SKIP_REASONS}


@dataclass(frozen=True, slots=True)
class Ahead:
    """The job's run that is running now (its exclusive one)."""

    scheduled_for: datetime
    started_at: datetime
    attempt: int = 1
    on_time: datetime | None = None  # on_time_at() of its tick; None: its tick


@dataclass(frozen=True, slots=True)
class Candidate:
    """A queued (or waiting) run asking to start, and its job's facts."""

    policy: ConcurrencyPolicy
    scheduled_for: datetime
    attempt: int
    due_at: datetime
    running: Ahead | None = None
    earlier_waiting: int = 0  # runs of the job waiting, with an earlier tick (buffer_one counts them)


def exclusive(policy: ConcurrencyPolicy) -> bool:
    """One running run per job at most (G3 for forbid; the buffers and replace too)."""
    return policy != "allow"


def lateness(ahead: Ahead) -> timedelta:
    """How much later than its tick (and jitter) a run started."""
    return ahead.started_at - (ahead.on_time or ahead.scheduled_for)


def started_late(ahead: Ahead) -> bool:
    return lateness(ahead) > timedelta(seconds=LATE_START_S)


def forbid_deadline(run: Candidate, ahead: Ahead) -> datetime | None:
    """Under `forbid`, until when `run` may wait for the running `ahead` before it is skipped:
    ON_TIME_S past its own due time, plus as much as `ahead` started late, up to ON_TIME_S more
    (a predecessor that started a second late ends a second late: a cold executor costs no tick).
    None (it waits until `ahead` ends, within its grace) when `ahead` started late beyond that,
    so a failover or handover costs no tick, or is a later tick's run (`run` is a retry, or was
    woken after the next tick started)."""
    if started_late(ahead) or (ahead.scheduled_for, ahead.attempt) > (run.scheduled_for, run.attempt):
        return None
    extra = min(max(lateness(ahead), timedelta(0)), timedelta(seconds=ON_TIME_S))
    return run.due_at + timedelta(seconds=ON_TIME_S) + extra


def overlap(run: Candidate, now: datetime) -> Overlap:
    """What the job's concurrency policy does with `run` now."""
    ahead = run.running
    if ahead is None or not exclusive(run.policy):
        return Overlap.CLAIM
    if run.policy == "replace":
        # The newest tick wins: an older one (a retry, a late token) does not end a newer one.
        older = (ahead.scheduled_for, ahead.attempt) < (run.scheduled_for, run.attempt)
        return Overlap.REPLACE if older else Overlap.SKIP
    if run.policy == "buffer_all":
        return Overlap.WAIT
    if run.policy == "buffer_one":
        return Overlap.WAIT if run.earlier_waiting == 0 else Overlap.BUFFER_FULL
    deadline = forbid_deadline(run, ahead)
    return Overlap.WAIT if deadline is None or now < deadline else Overlap.SKIP


def claims_at_once(
    policy: ConcurrencyPolicy, *, running: bool, expired_: bool, of_job_in_batch: int, grouped: bool = False
) -> bool:
    """A queued run that is claimed whatever its other facts: within its grace, its job's only run
    in the claim's batch, and nothing of its job running (or the job allows overlap): `overlap`
    then answers CLAIM; and its job names no concurrency group (that needs a slot: `allot`). The
    store claims these in one statement (CLAIM_FREE), the others after reading their facts; ahead
    of their due time it reserves these (the same statement), and no others."""
    return not expired_ and of_job_in_batch == 1 and (not running or not exclusive(policy)) and not grouped


def after_wait(run: Candidate, ended: Ahead, now: datetime) -> Overlap:
    """A waiting run whose predecessor `ended` just now: woken (CLAIM), or skipped when under
    `forbid` its wait ran out before the predecessor ended."""
    if run.policy == "forbid":
        deadline = forbid_deadline(run, ended)
        if deadline is not None and now > deadline:
            return Overlap.SKIP
    return Overlap.CLAIM


# --- the end of a run: its retry, its children -----------------------------------------------

RETRY_CAP_S = 3600.0


def retry_delay_s(attempt: int, max_retries: int, backoff_s: float, cap_s: float = RETRY_CAP_S) -> float | None:
    """Seconds from the failure of `attempt` (1-based) to attempt + 1, doubling each time up to
    `cap_s`; None when no retry is left (a job gets `max_retries` retries)."""
    if attempt > max_retries:
        return None
    if backoff_s <= 0:
        return 0.0
    exponent = min(max(attempt - 1, 0), 60)  # past 2**60 any positive backoff is over the cap
    return float(min(cap_s, backoff_s * float(2**exponent)))


@dataclass(frozen=True, slots=True)
class NewRun:
    """A queued run a transition's follow-up creates."""

    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: str
    due_at: datetime
    revision: int | None
    parent_run_id: int | None = None
    expires_at: datetime | None = None  # expiry(); None: stamped by the reaper (a run from the release before)
    host_of: int | None = None  # a retry: the failed run, whose host (a per-host run's, cronos.every_host) it takes


@dataclass(frozen=True, slots=True)
class Ended:
    """A run that just completed or failed, as its follow-ups need it."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    state: RunState
    finished_at: datetime
    revision: int | None
    parent_run_id: int | None
    retry_delay_s: float | None = None
    due_at: datetime | None = None
    expires_at: datetime | None = None  # as stamped (None: not stamped, a run from the release before)


def retry_of(run: Ended) -> NewRun | None:
    """A failed run's next attempt: the same tick (and revision and parent, and host: a per-host run's
    retry runs on its host), due after its backoff, with the grace its tick was stamped with
    (`expires_at - due_at`)."""
    if run.state is not RunState.FAILED or run.retry_delay_s is None:
        return None
    due = run.finished_at + timedelta(seconds=run.retry_delay_s)
    expires = None if run.expires_at is None or run.due_at is None else due + (run.expires_at - run.due_at)
    return NewRun(
        run.job_id, run.scheduled_for, run.attempt + 1, "retry", due, run.revision, run.parent_run_id, expires, run.id
    )


class Edge(NamedTuple):
    """A child job of a parent, as a chain run of it needs it (cronos.chains: when the edge fires;
    its grace stamps the run's expiry)."""

    child: int
    revision: int
    grace_s: float
    on: ChainOn = chains.DEFAULT_ON


def chain_runs(ended: Sequence[Ended], children: Mapping[int, Sequence[Edge]]) -> list[NewRun]:
    """A run of each child job (`children`: parent job id -> the edges of the active jobs naming
    it without a join) for each run that ended its tick in an outcome firing the edge, due at once.
    Its tick is the parent's finish instant, a ms apart per parent run of one child here, so their
    tick identities differ."""
    made: dict[int, int] = {}
    runs = []
    for run in sorted(ended, key=lambda r: r.id):
        if not chains.final(run.state, run.retry_delay_s is not None):
            continue
        for child, revision, grace_s, on in children.get(run.job_id, ()):
            if not chains.fires(on, run.state):
                continue
            tick = run.finished_at + timedelta(milliseconds=made.get(child, 0))
            made[child] = made.get(child, 0) + 1
            runs.append(NewRun(child, tick, 1, "chain", tick, revision, run.id, expiry(tick, grace_s)))
    return runs


# --- "retry this run": another attempt of an ended run's tick, asked for by someone ---------------
# The API queues it as it queues a manual run (Event.TRIGGERED: a new queued run, no owner, no
# epoch), guarded by the tick having no unfinished attempt and by the tick identity's unique key.


class Rerun(StrEnum):
    """What a request to retry a run does."""

    QUEUE = "queue"  # the next attempt of its tick is queued, due now
    NOT_ENDED = "not_ended"  # the run is still queued, waiting or running (409)
    COMPLETED = "completed"  # it succeeded: trigger the job for a new run instead (409)
    PENDING = "pending"  # another attempt of its tick has not ended yet (409)


def rerunnable(state: RunState) -> bool:
    """An ended run that did not succeed: failed, skipped, and any other end state but completed
    (a cancelled run too)."""
    return state in TERMINAL and state is not RunState.COMPLETED


@dataclass(frozen=True, slots=True)
class RerunFacts:
    """A run someone asks to retry, and what the ledger holds of its tick."""

    job_id: int
    scheduled_for: datetime
    attempt: int
    state: RunState
    revision: int | None
    parent_run_id: int | None
    newest_attempt: int  # the highest attempt number of its tick
    tick_unfinished: bool  # an attempt of its tick (this run included) is queued, waiting or running
    grace_s: float = 0.0  # its job's misfire grace now (the new attempt is stamped with it)


def rerun(run: RerunFacts) -> Rerun:
    """Whether the run may be retried by hand."""
    if run.state not in TERMINAL:
        return Rerun.NOT_ENDED
    if not rerunnable(run.state):
        return Rerun.COMPLETED
    return Rerun.PENDING if run.tick_unfinished else Rerun.QUEUE


def rerun_of(run: RerunFacts, now: datetime) -> NewRun:
    """The attempt a retry by hand queues: the same tick (so the same idempotency key), revision
    and parent, numbered after the tick's newest attempt, due now."""
    attempt = max(run.newest_attempt, run.attempt) + 1
    return NewRun(
        run.job_id, run.scheduled_for, attempt, "retry", now, run.revision, run.parent_run_id, expiry(now, run.grace_s)
    )


# --- the end of a job -------------------------------------------------------------------------


def runs_allowed(runs: Sequence[bool], runs_left: int | None) -> tuple[int, bool]:
    """Of a job's next ticks (`runs`: whether each runs), how many it writes with `runs_left`
    scheduled runs left (None: no max_runs), and whether that ends it. Skips do not count."""
    if runs_left is None:
        return len(runs), False
    if runs_left <= 0:
        return 0, True
    count = 0
    for index, runs_ in enumerate(runs):
        count += runs_
        if count == runs_left:
            return index + 1, True
    return len(runs), False


def end_status(*, one_off: bool, ran: int) -> str:
    """The status of a job that has nothing left to run: a one-off whose tick was skipped expired."""
    return "expired" if one_off and not ran else "completed"


# --- concurrency groups: runs of several jobs sharing `limit` slots ---------------------------
# A run of a job in a group starts only with a slot of the group. Its claim takes one (when the
# job's own policy lets it start), or the run waits for the group (Event.WAITED, `waiting_for` the
# group); a slot freed by a run's end goes to the group's first waiting run (Event.WOKEN), which
# holds it from then on. No new state or transition: the same `waiting` and `woken` as overlap.


@dataclass(frozen=True, slots=True)
class Contender:
    """A run asking for a slot of a group: being claimed now, or waiting for the group."""

    run_id: int
    scheduled_for: datetime
    waiting: bool = False


@dataclass(frozen=True, slots=True)
class Allotment:
    claim: frozenset[int] = frozenset()  # runs being claimed that take a slot: they start
    wait: frozenset[int] = frozenset()  # runs being claimed that wait for the group
    wake: tuple[int, ...] = ()  # waiting runs handed a slot, in tick order: woken


def allot(limit: int, held: int, contenders: Sequence[Contender]) -> Allotment:
    """The group's free slots (`limit` less the `held` ones: runs queued or running with a slot)
    go to its contenders in tick order (scheduled_for, then run id), whether they are being claimed
    now or already wait: a new tick never overtakes a run that waits for the group. A contender
    being claimed that gets no slot waits."""
    free = max(limit - held, 0)
    ordered = sorted(contenders, key=lambda c: (c.scheduled_for, c.run_id))
    granted, refused = ordered[:free], ordered[free:]
    return Allotment(
        claim=frozenset(c.run_id for c in granted if not c.waiting),
        wait=frozenset(c.run_id for c in refused if not c.waiting),
        wake=tuple(c.run_id for c in granted if c.waiting),
    )
