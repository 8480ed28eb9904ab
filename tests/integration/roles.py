"""A dispatcher or an executor running in the test's event loop, stopped on the way out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from dispatcher.service import Dispatcher
from executor.service import Executor


@contextlib.asynccontextmanager
async def running_role(role: Dispatcher | Executor) -> AsyncIterator[None]:
    async with role:
        task = asyncio.create_task(role.run(), name=f"test:{role.name}")
        try:
            yield
        finally:
            role.stop()
            await asyncio.wait_for(task, timeout=15)
