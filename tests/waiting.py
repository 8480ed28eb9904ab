"""Wait on a condition with a deadline, never sleep-and-hope."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def poll(probe: Callable[[], Awaitable[T]], *, timeout: float, interval: float = 0.02) -> T:
    """Await `probe()` until it returns something truthy or `timeout` seconds pass; its last value either way.

    For callers that report a missed deadline themselves (a recovery that took too long is a
    measurement, not an error); everyone else wants `wait_for`.
    """
    deadline = time.monotonic() + timeout
    while True:
        last = await probe()
        if last or time.monotonic() > deadline:
            return last
        await asyncio.sleep(interval)


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"
) -> T:
    """Await `probe()` until it returns something truthy (a probe may return None for "not yet"); fail
    after `timeout` seconds."""
    last = await poll(probe, timeout=timeout, interval=interval)
    if last is None or not last:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
    return last


def block_until(probe: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.01, what: str = "condition") -> T:
    """`wait_for` for code outside an event loop (process control, server start-up): blocks the thread."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last is not None and last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


def answers(url: str, *, timeout: float = 2.0) -> bool:
    """Whether a GET of `url` answers 200 now (a server up yet?): False while nothing listens there."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False
