"""Tasks the browser tests' executor imports (`cronos dev --import tests.browser.tasks`)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import cronos


@cronos.task("browser.ok", replace=True)
async def ok(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """A short run of varying length, so the job page's chart has a shape."""
    await asyncio.sleep(random.uniform(0.01, 0.12))
    return {"attempt": ctx.attempt}


@cronos.task("browser.fail", replace=True)
async def fail(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    raise RuntimeError("browser test failure: the disk is full")


@cronos.task("browser.echo", replace=True)
async def echo(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """What the run got (a trigger's overrides merged in): the run page shows it as its result."""
    return {"payload": payload, "key": ctx.idempotency_key}


@cronos.task("browser.slow", replace=True)
async def slow(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """Runs `seconds` (default 8) unless cancelled: an export that overruns what its job expects."""
    try:
        await asyncio.wait_for(ctx.cancelled.wait(), timeout=float(payload.get("seconds", 8)))
    except TimeoutError:
        return {"done": True}
    return {"done": False, "cancelled": True}


from tests.cluster import output_tasks  # noqa: E402, F401  out.gated: the run page's live output
