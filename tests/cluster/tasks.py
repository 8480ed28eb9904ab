"""Task functions the chaos cluster's executors import (`cronos executor --import tests.cluster.tasks`)."""

from __future__ import annotations

import asyncio
from typing import Any

import cronos


@cronos.task("sleep", replace=True)
async def sleep(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """A long run: sleeps `payload.seconds` (cancellable, like real async work)."""
    await asyncio.sleep(float(payload.get("seconds", 1)))
    return {"slept": payload.get("seconds", 1), "attempt": ctx.attempt}


@cronos.task("noop", replace=True)
async def noop(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    return None
