"""Example user task code, loaded by `make run` (`cronos dev --import cronos.example_tasks`).

Shows the shape of a task: it receives the job's payload and a RunContext, logs with the
run's context, and returns a small JSON-able result that the ledger keeps as an excerpt.
Your own tasks live in your code base: `cronos executor --import myapp.tasks`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import cronos


@cronos.task("reindex")
async def reindex(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """The seed's example job: `{"action": "reindex", "target": "users"}`."""
    target = str(payload.get("target", "all"))
    ctx.logger.info("reindexing %s", target, extra={"event": "example.reindex", "target": target})
    await asyncio.sleep(float(payload.get("seconds", 0.05)))  # stands in for the real work
    return {"target": target, "idempotency_key": ctx.idempotency_key, "attempt": ctx.attempt}
