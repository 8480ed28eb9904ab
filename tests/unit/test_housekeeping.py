"""The leader's housekeeping never ends its term: every failure is logged and the pass retried soon."""

from __future__ import annotations

import asyncio
import logging

import pytest

from cronos.errors import BackendUnavailable
from cronos.settings import Settings
from dispatcher.housekeeping import Housekeeping


class _Publisher:
    """Fails its passes as listed (an exception, or None for a pass that works)."""

    def __init__(self, failures: list[BaseException | None]) -> None:
        self._failures = failures
        self.passes = 0

    async def data_lost(self) -> str | None:
        self.passes += 1
        failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            raise failure
        return None

    async def housekeeping(self, named: object) -> int:
        return 0


class _Term:
    """Records each sleep; ends the loop (as a term ending does) after `passes` sleeps."""

    def __init__(self, passes: int) -> None:
        self.sleeps: list[float] = []
        self._passes = passes

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) > self._passes:
            raise asyncio.CancelledError


async def test_failures_of_every_kind_are_logged_and_retried_sooner_than_the_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures: list[BaseException | None] = [
        BackendUnavailable("redis", "Connection closed by server"),
        ValueError("invalid literal for int() with base 10: 'None'"),
        None,
        None,
    ]
    publisher = _Publisher(failures)
    housekeeping = Housekeeping(publisher, object(), Settings(), object())  # type: ignore[arg-type]
    term = _Term(passes=4)
    caplog.set_level(logging.WARNING)
    with pytest.raises(asyncio.CancelledError):
        await housekeeping.run(term)  # type: ignore[arg-type]
    assert publisher.passes == 4
    failed = [r for r in caplog.records if getattr(r, "event", None) == "housekeeping.failed"]
    assert [getattr(r, "error", "").split(":")[0] for r in failed] == ["BackendUnavailable", "ValueError"]
    interval = housekeeping.interval_s
    # The first pass after the interval; each failed pass is retried after a short backoff; once a
    # pass works, the interval again.
    assert term.sleeps[0] == interval
    assert all(s < interval for s in term.sleeps[1:3]), term.sleeps
    assert term.sleeps[3:] == [interval, interval]
