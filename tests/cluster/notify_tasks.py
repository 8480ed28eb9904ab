"""The task of the end-to-end notification test (`cronos executor --import tests.cluster.notify_tasks`)."""

from __future__ import annotations

from typing import Any

import cronos


@cronos.task("notify.check", replace=True)
async def check(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Fails until its payload says `ok` (a PATCH of the job's payload mends it)."""
    if not payload.get("ok"):
        raise RuntimeError("the backup disk is full")
