"""The API's compute thread: pure computations (previews, tick pages, the fleet's starts) run here,
never on the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
# One thread for the API's pure computations (previews, tick pages): bounded, but milliseconds of
# CPU that must not hold the event loop (/health, and in `cronos dev` the dispatcher and executor).
# One, because the GIL lets no second one add throughput, only contention with the loop.
_COMPUTE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="api-compute")


def hand_back() -> None:
    """Between two steps of a computation on the compute thread: let the event loop's thread take the
    GIL if it waits for it. Otherwise it gets it only when the switch interval (5 ms) forces a
    hand-over, several times per request (/health p99 ~60 ms instead of ~30 ms under 8 clients).
    Called every few steps: each call may give the CPU away too."""
    time.sleep(0)  # releases the GIL


async def off_loop(compute: Callable[..., T], *args: Any) -> T:
    """`compute(*args)` on the API's compute thread, its turn after those already waiting."""
    return await asyncio.get_running_loop().run_in_executor(_COMPUTE, compute, *args)
