"""The leader's runs-due loop (dispatcher.due_gauge) on a fake term and clock: the series follow the
book's queues pass by pass, and go when the term ends."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from cronos import metrics
from dispatcher import due_gauge
from dispatcher.schedule_book import ScheduleBook
from tests.unit.test_planner import _job

NOW = datetime(2026, 1, 5, 11, 59, 30, 250_000, tzinfo=UTC)


class Term:
    """Each sleep waits for the test to let one pass run; `over` ends the term as a real one does."""

    def __init__(self) -> None:
        self.passes = asyncio.Queue[None]()
        self.slept = asyncio.Queue[float]()

    def checkpoint(self) -> None:
        pass

    async def sleep(self, seconds: float) -> None:
        await self.slept.put(seconds)
        await self.passes.get()


def _series() -> dict[tuple[str, str, str], float]:
    return {
        (sample.name, sample.labels["queue"], sample.labels["within_s"]): sample.value
        for gauge in (metrics.RUNS_DUE, metrics.RUNS_DUE_PEAK)
        for family in gauge.collect()
        for sample in family.samples
    }


async def test_series_follow_the_queues_and_go_with_the_term() -> None:
    book = ScheduleBook()
    book.apply([_job(1, "* * * * * *", NOW, queue="a"), _job(2, "0 * * * * *", NOW, queue="b")], ())
    term = Term()
    loop = asyncio.create_task(due_gauge.run(term, book, lambda: NOW))
    try:
        assert await term.slept.get() == due_gauge.INTERVAL_S  # the first pass waits: the book loads
        term.passes.put_nowait(None)
        await term.slept.get()  # a pass ran
        series = _series()
        assert series[("cronos_runs_due", "a", "60")] == 60 and series[("cronos_runs_due_peak", "a", "60")] == 1
        assert series[("cronos_runs_due", "b", "300")] == 5
        assert series[("cronos_runs_due", "default", "30")] == 0  # always there, for the default pool
        assert len(series) == 3 * 3 * 2

        book.apply((), [2])  # b's one job paused: b has no series, a keeps its own
        term.passes.put_nowait(None)
        await term.slept.get()
        assert {queue for _m, queue, _h in _series()} == {"a", "default"}
    finally:
        loop.cancel()  # the term ends
        await asyncio.gather(loop, return_exceptions=True)
    assert _series() == {}


async def test_a_slow_pass_spaces_the_next_out() -> None:
    """A pass costs at most MAX_SHARE of a core: one that took a second is followed by a longer sleep."""
    term = Term()
    timer = iter([0.0, 1.0, 1.0, 1.1])  # a pass of 1 s, then one of 0.1 s
    loop = asyncio.create_task(due_gauge.run(term, ScheduleBook(), lambda: NOW, timer=lambda: next(timer)))
    try:
        assert await term.slept.get() == due_gauge.INTERVAL_S
        term.passes.put_nowait(None)
        assert await term.slept.get() == 1.0 / due_gauge.MAX_SHARE
        term.passes.put_nowait(None)
        assert await term.slept.get() == due_gauge.INTERVAL_S
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
