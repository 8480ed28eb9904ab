"""How every role starts and stops.

A role is used as `async with role: await role.run()` and has a synchronous, idempotent
`stop()`. Signal handlers are installed here, at the process edge, never by a role.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from types import TracebackType
from typing import Protocol, Self

from cronos.runtime import settle_heap

log = logging.getLogger("cronos.roles")


class Role(Protocol):
    name: str

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def run(self) -> None: ...

    def stop(self) -> None: ...


async def serve(roles: Sequence[Role]) -> None:
    """Run roles side by side until each returns; SIGTERM/SIGINT asks every one to stop."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        log.info("stop requested", extra={"event": "process.stopping", "signal": signal.Signals(signum).name})
        for role in roles:
            role.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        async with contextlib.AsyncExitStack() as stack:
            for role in roles:
                await stack.enter_async_context(role)
            settle_heap()  # what the roles opened stays: no collection scans it again
            async with asyncio.TaskGroup() as group:
                for role in roles:
                    group.create_task(role.run(), name=f"role:{role.name}")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
