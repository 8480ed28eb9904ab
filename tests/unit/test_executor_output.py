"""executor/output.py without a database: when a capture's lines are taken to be written."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from cronos.run_output import Bounds
from cronos.store.run_output import Written
from executor.output import TAIL_FLUSH_S, Writer


async def _nowhere(batch: list[Written]) -> None:
    pass


def test_a_run_that_writes_nothing_is_one_object_and_nothing_to_end() -> None:
    writer = Writer(_nowhere, Bounds(10, 100_000))
    with writer.capturing(1, datetime.now(UTC), ()) as capture:
        pass
    assert capture.silent and capture.take(0.0) is None and not capture._end()


async def test_past_its_head_a_running_runs_tail_is_taken_once_a_second_at_most_and_at_its_end() -> None:
    writer = Writer(_nowhere, Bounds(10, 100_000))
    capture = writer.capturing(1, datetime.now(UTC), ())
    capture.write("stdout", "".join(f"l{i}\n" for i in range(3)))
    assert capture.take(100.0) is not None and capture.take(100.0) is None  # the head: at once, once
    capture.write("stdout", "".join(f"m{i}\n" for i in range(50)))  # past the head
    assert capture.take(100.0 + TAIL_FLUSH_S / 2) is None  # the tail waits...
    first = capture.take(100.0 + TAIL_FLUSH_S)  # ... a second at most
    assert first is not None and [line.text for line in first.pending.lines][-1] == "m49"
    capture.write("stdout", "n0\n")
    assert capture.take(100.0 + 1.5 * TAIL_FLUSH_S) is None
    later = capture.take(100.0 + 2 * TAIL_FLUSH_S)
    assert later is not None and later.pending.lines[-1].text == "n0"
    capture.write("stdout", "n1")
    assert capture._end()  # the run ended: its last lines are taken at the writer's next flush
    assert capture._live is not None
    capture._live.ended = asyncio.get_running_loop().create_future()
    last = capture.take(100.0 + 2 * TAIL_FLUSH_S)
    assert last is not None and last.pending.lines[-1].text == "n1"
