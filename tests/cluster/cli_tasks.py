"""Tasks of the jobs CLI tests (`cronos dev --import tests.cluster.cli_tasks`)."""

from __future__ import annotations

from typing import Any

import cronos


@cronos.task("cli.fail", replace=True)
async def fail(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    raise RuntimeError(f"disk {payload.get('disk', '?')} is full")


@cronos.task("cli.echo", replace=True)
async def echo(payload: dict[str, Any], ctx: cronos.RunContext) -> dict[str, Any]:
    """What the run got: its payload (with a trigger's overrides), idempotency key and attempt."""
    return {"payload": payload, "key": ctx.idempotency_key, "attempt": ctx.attempt}
