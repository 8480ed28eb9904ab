"""Small asyncio helpers every role uses."""

from __future__ import annotations

import asyncio


async def wait_any(*events: asyncio.Event) -> None:
    """Return as soon as one of `events` is set (waiters are cleaned up either way)."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
