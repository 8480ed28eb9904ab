"""Wait on a condition with a deadline, never sleep-and-hope."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"
) -> T:
    """Await `probe()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        await asyncio.sleep(interval)
