"""Which runs in flight a heartbeat extends (executor.heartbeat.beaten): every run whose work goes
on, and a run whose work is over (its result waiting for its batch) once it is not young, so that
its lease never comes nearer its end than half a lease at a beat."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from cronos.store.claims import ClaimedRun
from executor.heartbeat import beaten
from executor.running import InFlight

CLAIMED = datetime(2026, 1, 1, tzinfo=UTC)
LEASE_S = 12.0  # a beat every 4 s; young: claimed less than 2 s ago


def flight(run_id: int, *, working: bool) -> InFlight:
    """A run in flight; `working`: its work goes on (its task is the test's own)."""
    run = ClaimedRun(
        id=run_id, job_id=run_id, scheduled_for=CLAIMED, attempt=1, trigger="schedule", epoch=1, started_at=CLAIMED,
        due_at=CLAIMED, exclusive=False, name="j", kind="task", payload={}, timeout_s=10, max_retries=0,
        retry_backoff_s=1, concurrency_policy="allow", webhook_secret="s",
    )  # fmt: skip
    return InFlight(run, "lock", ("default", f"{run_id}-0".encode()), task=asyncio.current_task() if working else None)


def at(seconds_after_claim: float) -> float:
    return (CLAIMED + timedelta(seconds=seconds_after_claim)).timestamp()


async def test_a_working_run_is_extended_however_young() -> None:
    working = flight(1, working=True)
    assert beaten([working], at(0.1), LEASE_S) == [working]


async def test_a_finished_run_waiting_for_its_result_write_is_left_while_young() -> None:
    done = flight(2, working=False)
    assert beaten([done], at(1.9), LEASE_S) == []
    assert beaten([done], at(2.0), LEASE_S) == [done]
    assert beaten([done], at(30.0), LEASE_S) == [done]  # a write held up (PostgreSQL away): kept alive


async def test_a_left_run_keeps_half_a_lease_at_the_next_beat() -> None:
    done = flight(3, working=False)
    for seconds in (0.0, 0.5, 1.0, 1.99):
        if not beaten([done], at(seconds), LEASE_S):
            left_at_next_beat = LEASE_S - (seconds + LEASE_S / 3)
            assert left_at_next_beat >= LEASE_S / 2


async def test_order_and_membership_follow_the_flights() -> None:
    flights = [flight(4, working=False), flight(5, working=True), flight(6, working=False)]
    assert [f.run.id for f in beaten(flights, at(1.0), LEASE_S)] == [5]
    assert [f.run.id for f in beaten(flights, at(5.0), LEASE_S)] == [4, 5, 6]
