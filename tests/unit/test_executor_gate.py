"""The executor's gate in front of the claims batcher: due instants on the wall clock,
execution slots, withdrawal on drain (no I/O: a fake backend and a wall clock the test
moves; the gate's timers still run on the loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from executor.batcher import Batcher
from executor.gate import Gate, Withdrawn
from tests.waiting import wait_for


class Clock:
    """A wall clock the test moves (seconds). Each reading is signalled: a timer that fired reads it."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.reads = 0
        self.read = asyncio.Event()

    def __call__(self) -> float:
        self.reads += 1
        self.read.set()
        return self.now

    async def read_again(self, times: int) -> None:
        """Until the gate has read the clock `times` more times."""
        until = self.reads + times
        while self.reads < until:
            self.read.clear()
            await asyncio.wait_for(self.read.wait(), 5)


class Backend:
    """Answers item * 10 and keeps each call's items."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    async def call(self, items: list[int]) -> list[int]:
        self.calls.append(items)
        return [i * 10 for i in items]


def gate_of(slots: int, clock: Callable[[], float] | None = None) -> tuple[Gate[int, int], Backend]:
    backend = Backend()
    batcher: Batcher[int, int] = Batcher("claims", backend.call)
    return (Gate(batcher, slots, clock) if clock else Gate(batcher, slots)), backend


def holds(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return condition()

    return probe


def started(*waits: Awaitable[object]) -> list[asyncio.Future[object]]:
    return [asyncio.ensure_future(w) for w in waits]


async def test_the_tokens_of_an_instant_are_claimed_in_one_batch_once_the_wall_clock_reads_it() -> None:
    clock = Clock(999.98)  # 20 ms before the instant: the timer fires and re-arms
    gate, backend = gate_of(10, clock)
    waiting = started(*(gate.claim(i, 1_000_000) for i in range(3)))
    assert await gate.claim(9, 999_000) == 90  # already past: at once
    gate.leave()
    await wait_for(holds(lambda: gate.held == 3), timeout=5, interval=0, what="three tokens held")
    await clock.read_again(3)  # the timer fired (and re-armed) a few times: the instant has not come
    assert backend.calls == [[9]] and gate.busy == 0  # held tokens take no slot
    clock.now = 1000.0
    assert await asyncio.wait_for(asyncio.gather(*waiting), 5) == [0, 10, 20]
    assert backend.calls == [[9], [0, 1, 2]] and gate.busy == 3


async def test_slots_bound_claims_and_go_in_arrival_order() -> None:
    gate, backend = gate_of(2)
    assert await asyncio.gather(gate.claim(1), gate.claim(2)) == [10, 20]
    waiting = started(*(gate.claim(i) for i in (3, 4, 5)))
    await wait_for(holds(lambda: gate.queued == 3), timeout=5, interval=0, what="three waiting for a slot")
    gate.leave()
    gate.leave()
    assert await asyncio.wait_for(asyncio.gather(*waiting[:2]), 5) == [30, 40]
    assert gate.queued == 1 and gate.busy == 2
    gate.leave()
    assert await asyncio.wait_for(waiting[2], 5) == 50
    assert backend.calls == [[1, 2], [3, 4], [5]]


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    gate, _ = gate_of(1)
    await gate.claim(1)
    first, second = started(gate.claim(2), gate.claim(3))
    await wait_for(holds(lambda: gate.queued == 2), timeout=5, interval=0, what="two waiting")
    first.cancel()
    gate.leave()
    assert await asyncio.wait_for(second, 5) == 30
    assert gate.busy == 1


async def test_a_failed_claim_gives_its_slot_back() -> None:
    async def down(items: list[int]) -> list[int]:
        raise ConnectionError("backend down")

    gate: Gate[int, int] = Gate(Batcher("claims", down), 1)
    with pytest.raises(ConnectionError):
        await gate.claim(1)
    assert gate.busy == 0


async def test_withdraw_fails_every_wait_and_every_later_one() -> None:
    clock = Clock(999.99)
    gate, backend = gate_of(1, clock)
    await gate.claim(1)
    held = started(gate.until(1_000_000), gate.claim(2, 1_000_000))
    for_slot = started(gate.claim(3))
    await wait_for(holds(lambda: gate.held == 2 and gate.queued == 1), timeout=5, interval=0, what="waiting")
    assert gate.withdraw() == 3
    for task in [*held, *for_slot]:
        with pytest.raises(Withdrawn):
            await task
    with pytest.raises(Withdrawn):
        await gate.claim(4)  # draining: nothing new starts
    assert backend.calls == [[1]]


async def test_a_lent_slot_goes_to_a_waiting_token_and_comes_back_before_the_next_one() -> None:
    gate, backend = gate_of(1)
    await gate.claim(1)  # the run that will wait for its host
    second = started(gate.claim(2))
    await wait_for(holds(lambda: gate.queued == 1), timeout=5, interval=0, what="a token waiting for a slot")
    gate.lend()  # the run waits elsewhere: its slot serves the waiting token
    assert await asyncio.wait_for(second[0], 5) == 20
    third = started(gate.claim(3))
    await wait_for(holds(lambda: gate.queued == 1), timeout=5, interval=0, what="another token waiting")
    back = started(gate.reclaim())
    await asyncio.sleep(0)  # one step: the reclaim is in line
    gate.leave()  # token 2's work ends: the lender gets the slot before token 3
    await asyncio.wait_for(back[0], 5)
    assert gate.busy == 1 and gate.queued == 1 and not third[0].done()
    gate.leave()
    assert await asyncio.wait_for(third[0], 5) == 30
    assert backend.calls == [[1], [2], [3]]


async def test_reclaim_holds_a_slot_however_it_ends() -> None:
    gate, _ = gate_of(1)
    await gate.claim(1)
    gate.lend()
    await gate.claim(2)  # the lent slot is taken
    back = started(gate.reclaim())
    await asyncio.sleep(0)  # one step: the reclaim is in line
    back[0].cancel()  # the run's timeout ends its wait for a slot: it holds one all the same
    with pytest.raises(asyncio.CancelledError):
        await back[0]
    assert gate.busy == 2  # one over, for a moment: the run gives it back as its work ends
    gate.leave()
    gate.leave()
    assert gate.busy == 0
    await gate.claim(3)
    gate.lend()
    gate.retake()  # a run that lent its slot and ends at once takes it back without waiting
    assert gate.busy == 1


@pytest.mark.parametrize("waits", ["until", "claim"])
async def test_an_instant_that_comes_between_two_clock_readings_still_releases_its_token(waits: str) -> None:
    """A token arrives at its instant (the push lead): the caller reads the clock just before it,
    the gate just after. The token is released all the same, at once (it waited for good, and its
    run started 3 s late when the watchdog pushed it again)."""
    readings = iter([99.999, 100.001])
    clock = Clock(100.001)
    gate, backend = gate_of(2, lambda: next(readings, clock()))
    at_ms = 100_000
    if waits == "until":
        await asyncio.wait_for(gate.until(at_ms), 1)
    else:
        assert await asyncio.wait_for(gate.claim(7, at_ms), 1) == 70
        assert backend.calls == [[7]]
    assert gate.held == 0
