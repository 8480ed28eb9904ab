"""How a role's process runs: on which event loop, and how often its garbage collector looks.

A role's hot path is Python around sockets: per run, an executor wakes a few futures, decodes
rows and writes a log line. uvloop (the default, CRONOS_EVENT_LOOP=asyncio turns it off) runs
the loop's own share of that, its callbacks, timers and socket reads and writes, for less CPU.

The garbage collector is the other share: every 700 new container objects (a run makes dozens:
its task, futures, rows, log record) CPython scans the young ones, and every tenth scan the
older ones too, which at a thousand runs a second cost an executor a sixth of its CPU. Once a
role has opened (its modules, settings, pools: objects it keeps for good) `settle_heap` freezes
what exists, so no scan visits it again, and scans only after `YOUNG` new objects. Garbage
cycles are still collected, a little later.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("uvloop", "asyncio")
YOUNG = 50_000  # new container objects between two collections of the youngest generation
OLDER = (20, 100)  # the older generations' thresholds (CPython's default: 10, 10)


def loop_factory(event_loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop named by CRONOS_EVENT_LOOP (None: asyncio's own)."""
    if event_loop == "uvloop":
        import uvloop  # only the roles that run on it import it

        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T], event_loop: str) -> T:
    """`asyncio.run(main)` on the loop CRONOS_EVENT_LOOP names."""
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        return runner.run(main)


def settle_heap() -> None:
    """Once a process's roles are open: collect, freeze what is left, scan the young less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, *OLDER)
