"""The task of the end-to-end notification test (`cronos executor --import tests.cluster.notify_tasks`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import cronos


@cronos.task("notify.check", replace=True)
async def check(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Fails until its payload says `ok` (a PATCH of the job's payload mends it)."""
    if not payload.get("ok"):
        raise RuntimeError("the backup disk is full")


@cronos.task("notify.upstream", replace=True)
async def upstream(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Fails until the file its payload names exists: an upstream that comes back by itself (the
    job is not edited, so a breaker holding it paused keeps it: docs/breaker.md's canary)."""
    if not await asyncio.to_thread(Path(payload["ready"]).exists):
        raise RuntimeError("the upstream API answered 503")
