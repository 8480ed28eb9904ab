"""The run lifecycle (pure): the transition table and each decision, from tables of cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronos.lifecycle import (
    BY_EVENT,
    ON_TIME_S,
    TERMINAL,
    TRANSITIONS,
    Actor,
    Ahead,
    Cancel,
    Candidate,
    Edge,
    Ended,
    Event,
    Fence,
    IllegalTransition,
    NewRun,
    Overlap,
    RunState,
    after_wait,
    cancel,
    cancelled_by,
    chain_runs,
    claims_at_once,
    due_anew,
    end_status,
    expired,
    expiry,
    grace,
    jitter_s,
    late_beyond_grace,
    lost,
    misfire,
    on_time_at,
    one_pending,
    overdue_before,
    overlap,
    retry_delay_s,
    retry_of,
    runs_allowed,
    stale_tick_runs,
    startable,
    transition,
)
from cronos.models import RUN_STATES

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
Q, W, R, C, F, S = (RunState(s) for s in ("queued", "waiting", "running", "completed", "failed", "skipped"))


def _ago(*seconds: float) -> list[datetime]:
    return [NOW - timedelta(seconds=s) for s in seconds]


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


# --- the table -----------------------------------------------------------------------------


def test_every_event_has_exactly_one_transition_and_nothing_leaves_a_terminal_state() -> None:
    assert sorted(t.event for t in TRANSITIONS) == sorted(Event)
    for t in TRANSITIONS:
        assert not (t.sources & TERMINAL), t
    # Every non-terminal state can end: no run is stuck by construction.
    for state in (Q, W, R):
        reachable = {t.target for t in TRANSITIONS if state in t.sources}
        assert reachable & TERMINAL, state


@pytest.mark.parametrize(
    ("event", "source", "target", "actor", "fence"),
    [
        (Event.WRITTEN, None, Q, Actor.LEADER, Fence.EPOCH),
        (Event.TRIGGERED, None, Q, Actor.API, Fence.STATE),
        (Event.RETRIED, None, Q, Actor.EXECUTOR, Fence.OWNER),
        (Event.CHAINED, None, Q, Actor.EXECUTOR, Fence.OWNER),
        (Event.PUSHED, Q, Q, Actor.LEADER, Fence.EPOCH),
        (Event.UNPUSHED, Q, Q, Actor.LEADER, Fence.EPOCH),
        (Event.CLAIMED, Q, R, Actor.EXECUTOR, Fence.STATE),
        (Event.WAITED, Q, W, Actor.EXECUTOR, Fence.STATE),
        (Event.WOKEN, W, Q, Actor.EXECUTOR, Fence.STATE),
        (Event.OVERLAPPED, W, S, Actor.LEADER, Fence.STATE),
        (Event.MISFIRED, Q, S, Actor.LEADER, Fence.EPOCH),
        (Event.EXPIRED, W, S, Actor.LEADER, Fence.STATE),
        (Event.HANDED_OVER, Q, S, Actor.API, Fence.JOB),
        (Event.COMPLETED, R, C, Actor.EXECUTOR, Fence.OWNER),
        (Event.FAILED, R, F, Actor.EXECUTOR, Fence.OWNER),
        (Event.LOST, R, F, Actor.LEADER, Fence.EPOCH),
        (Event.REPLACED, R, F, Actor.EXECUTOR, Fence.STATE),
    ],
)
def test_the_table_says_who_moves_a_run_and_what_fences_it(
    event: Event, source: RunState | None, target: RunState, actor: Actor, fence: Fence
) -> None:
    t = transition(event, source)
    assert (t.target, t.fence) == (target, fence)
    assert actor in t.actors


@pytest.mark.parametrize(
    ("event", "source"),
    [(Event.CLAIMED, R), (Event.CLAIMED, W), (Event.COMPLETED, Q), (Event.WOKEN, Q), (Event.LOST, W),
     (Event.MISFIRED, R), (Event.WRITTEN, Q), (Event.CLAIMED, None), (Event.EXPIRED, R)],
)  # fmt: skip
def test_an_event_that_cannot_happen_in_a_state_is_refused(event: Event, source: RunState | None) -> None:
    with pytest.raises(IllegalTransition):
        transition(event, source)


def test_skips_and_failures_record_their_reason() -> None:
    assert BY_EVENT[Event.OVERLAPPED].reason == "previous run still running"
    assert BY_EVENT[Event.MISFIRED].reason == "misfired"
    assert BY_EVENT[Event.EXPIRED].reason == "expired"
    assert BY_EVENT[Event.LOST].reason == "executor lost"
    assert BY_EVENT[Event.REPLACED].reason == "replaced"


# --- misfire -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "ages", "grace", "complete", "runs"),
    [
        ("skip", (0.5, 0), 0, True, [True, True]),  # on time: every policy runs, even with no grace
        ("run_once", (0.5, 0), 0, True, [True, True]),
        ("skip", (50, 40, 3, 2), 60, True, [True] * 4),  # late within the grace is not a misfire (G7)
        ("skip", (300, 120, 30, 0), 60, True, [False, False, True, True]),
        ("run_all", (300, 120, 30), 60, True, [True, True, True]),
        ("run_once", (300, 200, 120), 60, True, [False, False, True]),  # the newest stands for the lot
        ("run_once", (300, 120, 30), 60, True, [False, False, True]),  # a tick within the grace follows
        ("run_once", (300, 200), 60, False, [False, False]),  # a later chunk holds the newest
    ],
)
def test_misfire_policy(policy: str, ages: tuple[float, ...], grace: float, complete: bool, runs: list[bool]) -> None:
    assert misfire(policy, _ago(*ages), NOW, grace, complete=complete) == runs  # type: ignore[arg-type]


@given(
    st.sampled_from(["run_all", "run_once", "skip"]),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=50, unique=True),
    st.floats(min_value=0, max_value=5_000),
    st.booleans(),
)
def test_every_tick_gets_one_decision_and_the_policy_only_touches_misfired_ticks(
    policy: str, ages: list[int], grace: float, complete: bool
) -> None:
    ticks = sorted(_ago(*ages))
    runs = misfire(policy, ticks, NOW, grace, complete=complete)  # type: ignore[arg-type]
    assert len(runs) == len(ticks)
    misfired = [NOW - t >= timedelta(seconds=max(grace, ON_TIME_S)) for t in ticks]  # now >= its expiry
    assert all(r for m, r in zip(misfired, runs, strict=True) if not m)
    expected = {
        "run_all": misfired.count(True),
        "skip": 0,
        "run_once": int(complete and bool(misfired) and misfired[-1]),
    }
    assert sum(r for m, r in zip(misfired, runs, strict=True) if m) == expected[policy]


@pytest.mark.parametrize(
    ("policy", "newest", "runs"),
    [("skip", True, False), ("run_all", False, True), ("run_once", True, True), ("run_once", False, False)],
)
def test_a_stale_tick_pushed_again_follows_the_policy(policy: str, newest: bool, runs: bool) -> None:
    assert stale_tick_runs(policy, newest_written=newest) is runs  # type: ignore[arg-type]


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    offsets = [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert offsets == [jitter_s(7, 1_000 * i, 10.0) for i in range(1000)]
    assert all(0 <= o < 10.0 for o in offsets)
    assert len(set(offsets)) > 900
    assert 4.0 < sum(offsets) / len(offsets) < 6.0
    assert jitter_s(7, 1000, 0) == 0.0
    assert jitter_s(7, 1000, 10.0) != jitter_s(8, 1000, 10.0)
    assert on_time_at(7, NOW, 10.0) == NOW + timedelta(seconds=jitter_s(7, int(NOW.timestamp() * 1000), 10.0))


# --- overlap -------------------------------------------------------------------------------

ON_TIME = Ahead(scheduled_for=at(-1), started_at=at(-1))  # the previous tick, started when due
LATE = Ahead(scheduled_for=at(-1), started_at=at(4))  # the previous tick, started 5 s late (a failover)
LATER_TICK = Ahead(scheduled_for=at(5), started_at=at(5))  # the next tick already runs
RETRY = Ahead(scheduled_for=at(-30), started_at=at(-0.5), attempt=2)  # a retry after its backoff


def run(policy: str, *, running: Ahead | None = None, waiting: int = 0, due: float = 0, attempt: int = 1) -> Candidate:
    return Candidate(policy, at(0), attempt, at(due), running, waiting)  # type: ignore[arg-type]


@given(
    policy=st.sampled_from(("forbid", "allow", "replace", "buffer_one", "buffer_all")),
    ahead=st.sampled_from((None, ON_TIME, LATE, RETRY, LATER_TICK)),
    waiting=st.integers(0, 3),
    now_s=st.floats(-5, 50),
)
def test_a_run_claimed_at_once_is_one_overlap_claims(
    policy: str, ahead: Ahead | None, waiting: int, now_s: float
) -> None:
    """The store's one-statement claim takes only runs the lifecycle claims whatever else holds."""
    if claims_at_once(policy, running=ahead is not None, expired_=False, of_job_in_batch=1):  # type: ignore[arg-type]
        assert overlap(run(policy, running=ahead, waiting=waiting), at(now_s)) is Overlap.CLAIM


def test_a_claim_at_once_needs_its_grace_and_its_jobs_only_run_of_the_batch() -> None:
    assert claims_at_once("forbid", running=False, expired_=False, of_job_in_batch=1)
    assert claims_at_once("allow", running=True, expired_=False, of_job_in_batch=1)
    assert not claims_at_once("forbid", running=True, expired_=False, of_job_in_batch=1)
    assert not claims_at_once("forbid", running=False, expired_=True, of_job_in_batch=1)
    assert not claims_at_once("allow", running=False, expired_=False, of_job_in_batch=2)


@pytest.mark.parametrize(
    ("candidate", "now", "answer"),
    [
        (run("forbid"), at(0), Overlap.CLAIM),  # nothing runs
        (run("allow", running=ON_TIME), at(0), Overlap.CLAIM),
        (run("forbid", running=ON_TIME), at(0.2), Overlap.WAIT),  # it may end within ON_TIME_S
        (run("forbid", running=ON_TIME), at(ON_TIME_S), Overlap.SKIP),  # still running past it
        (run("forbid", running=LATE), at(30), Overlap.WAIT),  # a failover's late start costs no tick
        (run("forbid", running=RETRY), at(30), Overlap.WAIT),  # nor a retry's backoff
        (run("forbid", running=LATER_TICK), at(30), Overlap.WAIT),  # a retry behind the next tick
        (run("forbid", running=ON_TIME, due=5), at(5.5), Overlap.WAIT),  # a paced catch-up run: from its due time
        (run("buffer_all", running=ON_TIME, waiting=7), at(50), Overlap.WAIT),
        (run("buffer_one", running=ON_TIME), at(50), Overlap.WAIT),
        (run("buffer_one", running=ON_TIME, waiting=1), at(0), Overlap.BUFFER_FULL),
        (run("replace", running=ON_TIME), at(0), Overlap.REPLACE),
        (run("replace", running=LATER_TICK), at(0), Overlap.SKIP),  # an older tick never ends a newer one
    ],
)
def test_overlap_policy(candidate: Candidate, now: datetime, answer: Overlap) -> None:
    assert overlap(candidate, now) is answer


@pytest.mark.parametrize(
    ("candidate", "ended_at", "answer"),
    [
        (run("forbid", running=ON_TIME), at(0.5), Overlap.CLAIM),  # ended within the wait
        (run("forbid", running=ON_TIME), at(1.5), Overlap.SKIP),  # ended after it: the tick is skipped
        (run("forbid", running=LATE), at(60), Overlap.CLAIM),  # it waited for a late start: it runs
        (run("buffer_all", running=ON_TIME), at(60), Overlap.CLAIM),
        (run("buffer_one", running=ON_TIME), at(60), Overlap.CLAIM),
    ],
)
def test_a_waiting_run_is_woken_by_its_predecessors_end(
    candidate: Candidate, ended_at: datetime, answer: Overlap
) -> None:
    assert candidate.running is not None
    assert after_wait(candidate, candidate.running, ended_at) is answer


def test_a_woken_run_starts_early_enough_not_to_count_as_late() -> None:
    # Woken at the end of its wait, it started 2 * ON_TIME_S late at most: the tick behind it waits
    # a second more for it (it will end that much later), then is skipped; no wait without bound.
    woken = Ahead(scheduled_for=at(0), started_at=at(2 * ON_TIME_S))
    follower = Candidate("forbid", at(1), 1, at(1), woken)
    assert overlap(follower, at(1 + 1.5 * ON_TIME_S)) is Overlap.WAIT
    assert overlap(follower, at(1 + 2 * ON_TIME_S)) is Overlap.SKIP


def test_a_predecessor_started_a_little_late_stretches_the_wait_by_as_much() -> None:
    # A cold executor started the previous run 1.9 s late: it ends 1.9 s late, and the next tick
    # waits for it up to ON_TIME_S plus at most ON_TIME_S more (seen at a cluster's start-up).
    cold = Ahead(scheduled_for=at(-1), started_at=at(0.9))
    assert overlap(Candidate("forbid", at(0), 1, at(0), cold), at(1.5)) is Overlap.WAIT
    assert after_wait(Candidate("forbid", at(0), 1, at(0), cold), cold, at(1.9)) is Overlap.CLAIM
    assert after_wait(Candidate("forbid", at(0), 1, at(0), cold), cold, at(2.1)) is Overlap.SKIP


# --- retry, chains, job end ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "max_retries", "backoff", "delay"),
    [(1, 3, 10, 10), (2, 3, 10, 20), (3, 3, 10, 40), (4, 3, 10, None), (1, 0, 10, None), (2, 5, 0, 0.0),
     (30, 40, 10, 3600), (10_000, 10**6, 1, 3600)],
)  # fmt: skip
def test_retry_backoff_doubles_up_to_its_cap_and_the_budget_is_max_retries(
    attempt: int, max_retries: int, backoff: float, delay: float | None
) -> None:
    assert retry_delay_s(attempt, max_retries, backoff) == delay


@given(st.floats(0.001, 1e6), st.integers(1, 10**6))
def test_retry_delay_never_shrinks_nor_passes_the_cap(backoff: float, attempt: int) -> None:
    first, second = retry_delay_s(attempt, 10**7, backoff), retry_delay_s(attempt + 1, 10**7, backoff)
    assert first is not None and second is not None
    assert 0 <= first <= second <= 3600


def _ended(state: str, *, run_id: int = 9, job: int = 1, delay: float | None = None) -> Ended:
    return Ended(run_id, job, at(-5), 1, RunState(state), at(0), 4, None, delay, at(-5), at(25))


def test_a_failed_run_with_a_retry_left_gets_its_next_attempt_after_the_backoff() -> None:
    # Its expiry: the grace its tick was stamped with (30 s), from its due time.
    # Its host: the failed run's (a per-host run's retry runs on its host).
    assert retry_of(_ended("failed", delay=20)) == NewRun(1, at(-5), 2, "retry", at(20), 4, None, at(50), 9)
    assert retry_of(_ended("failed", delay=None)) is None
    assert retry_of(_ended("completed", delay=20)) is None
    unstamped = Ended(9, 1, at(-5), 1, RunState.FAILED, at(0), 4, None, 20)  # written by the release before
    assert retry_of(unstamped) == NewRun(1, at(-5), 2, "retry", at(20), 4, None, None, 9)  # the reaper stamps it


def test_each_completed_run_queues_one_run_of_each_child_a_ms_apart_per_child() -> None:
    ended = [
        _ended("completed", run_id=5, job=1),
        _ended("completed", run_id=6, job=2),
        _ended("failed", run_id=7, job=1),
    ]
    children = {1: [Edge(10, 3, 60.0)], 2: [Edge(10, 3, 60.0), Edge(11, 1, 0.0)]}
    assert chain_runs(ended, children) == [
        NewRun(10, at(0), 1, "chain", at(0), 3, 5, at(60)),
        NewRun(10, at(0.001), 1, "chain", at(0.001), 3, 6, at(60.001)),  # two parents of job 10 ended together
        NewRun(11, at(0), 1, "chain", at(0), 1, 6, at(ON_TIME_S)),  # the grace's floor
    ]


def test_an_edge_fires_on_its_parents_final_outcome_only() -> None:
    ended = [
        _ended("failed", run_id=5, job=1, delay=10),  # a retry left: its tick has not ended
        _ended("failed", run_id=6, job=2),
        _ended("cancelled", run_id=7, job=3),
        _ended("completed", run_id=8, job=3),
    ]
    children = {1: [Edge(10, 1, 60.0, "failed")], 2: [Edge(10, 1, 60.0, "failed"), Edge(11, 1, 60.0),
                Edge(12, 1, 60.0, "ended")], 3: [Edge(12, 1, 60.0, "ended"), Edge(13, 1, 60.0, "failed")]}  # fmt: skip
    assert [(r.job_id, r.parent_run_id) for r in chain_runs(ended, children)] == [(10, 6), (12, 6), (12, 7), (12, 8)]


@pytest.mark.parametrize(
    ("runs", "left", "kept", "ends"),
    [([True] * 3, None, 3, False), ([True] * 3, 0, 0, True), ([True, False, True, True], 2, 3, True),
     ([False, False], 1, 2, False), ([True], 1, 1, True)],
)  # fmt: skip
def test_max_runs_counts_runs_not_skips(runs: list[bool], left: int | None, kept: int, ends: bool) -> None:
    assert runs_allowed(runs, left) == (kept, ends)


def test_a_one_off_whose_tick_was_skipped_expires_every_other_job_completes() -> None:
    assert end_status(one_off=True, ran=0) == "expired"
    assert end_status(one_off=True, ran=1) == "completed"
    assert end_status(one_off=False, ran=0) == "completed"


def test_the_api_states_are_the_lifecycles() -> None:
    assert tuple(RunState) == RUN_STATES


def test_the_documented_table_is_the_lifecycles() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "lifecycle.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    expected = []
    for t in TRANSITIONS:
        sources = ", ".join(sorted(s.value for s in t.sources)) or "(new run)"
        actors = ", ".join(sorted(a.value for a in t.actors))
        expected.append(
            f"| `{t.event.value}` | {sources} | {t.target.value} | {actors} | {t.fence.value} | {t.reason or ''} |"
        )
    assert rows == expected


def test_cancel_ends_a_pending_run_asks_a_running_one_and_refuses_an_ended_one() -> None:
    # A reserved run has not started (its start is a statement guarded by its state): ended at once.
    expected = {"queued": Cancel.NOW, "waiting": Cancel.NOW, "reserved": Cancel.NOW, "running": Cancel.REQUEST}
    for state in RunState:
        assert cancel(state) is expected.get(state.value, Cancel.ENDED), state
    assert cancelled_by("ops") == "cancelled by ops"
    assert RunState.CANCELLED in TERMINAL


def test_a_lost_run_is_retried_unless_someone_asked_to_cancel_it() -> None:
    assert lost(None) == (RunState.FAILED, "executor lost", True)
    assert lost("ops") == (RunState.CANCELLED, "cancelled by ops (executor lost)", False)


@pytest.mark.parametrize(
    ("misfire", "concurrency", "bounded"),
    [
        ("run_once", "forbid", True),  # the defaults
        ("run_all", "forbid", False),  # every tick runs
        ("skip", "forbid", False),
        ("run_once", "allow", False),
        ("run_once", "buffer_all", False),
        ("run_once", "replace", False),
    ],
)
def test_a_job_of_the_default_policies_holds_one_pending_run(misfire: str, concurrency: str, bounded: bool) -> None:
    assert one_pending(misfire, concurrency) is bounded  # type: ignore[arg-type]


def test_a_pending_run_holds_back_while_overdue() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert overdue_before(now) == now - timedelta(seconds=3 * ON_TIME_S)


def test_a_run_expires_at_the_instant_stamped_from_its_due_time_and_grace() -> None:
    due = datetime(2030, 1, 1, tzinfo=UTC)
    assert expiry(due, 60) == due + timedelta(seconds=60) == due + grace(60)
    assert expiry(due, 0) == due + timedelta(seconds=ON_TIME_S)  # the floor: a busy loop, a slow commit
    stamped = expiry(due, 5)
    assert not expired(stamped, stamped - timedelta(microseconds=1))
    assert expired(stamped, stamped)  # one rule: now >= expires_at
    # A tick not written yet is judged by the same rule, from its job's grace now.
    assert late_beyond_grace(due, stamped, 5) and not late_beyond_grace(due, stamped - timedelta(microseconds=1), 5)


def test_a_stale_tick_due_anew_keeps_the_grace_it_was_stamped_with() -> None:
    due, now = datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC)
    assert due_anew(due, due + timedelta(seconds=45), now) == now + timedelta(seconds=45)


def test_a_reserved_run_starts_without_asking_only_while_its_lease_and_its_grace_hold() -> None:
    lease_until, expires = 1000.0, 990.0
    assert startable(900.0, lease_until, expires)
    assert startable(900.0, lease_until, None)
    assert not startable(989.5, lease_until, expires)  # within START_MARGIN_S of its grace's end
    assert not startable(999.5, lease_until, None)  # within START_MARGIN_S of its lease's end: maybe reaped
    assert not startable(1001.0, lease_until, None)
