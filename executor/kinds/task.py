"""`task` runs: the function registered under `payload.action` with `@cronos.task`."""

from __future__ import annotations

import logging

import msgspec

from cronos import tasks
from cronos.store.runs import ClaimedRun
from executor.kinds.base import Env, RunFailed, excerpt

log = logging.getLogger("cronos.task")


async def run(run: ClaimedRun, env: Env) -> str | None:
    action = run.payload.get("action")
    if not isinstance(action, str) or not action:
        raise RunFailed("payload.action is missing: a task job names its function in payload.action")
    fn = tasks.lookup(action)
    if fn is None:
        raise RunFailed(f"no task registered for action '{action}'")
    ctx = tasks.RunContext(
        job_id=run.job_id,
        run_id=run.id,
        scheduled_for=run.scheduled_for,
        attempt=run.attempt,
        logger=logging.getLogger(f"cronos.task.{action}"),
    )
    value = await tasks.call(fn, dict(run.payload), ctx)
    if value is None:
        return None
    if isinstance(value, str | bytes):
        return excerpt(value, env.settings.result_max_bytes)
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError):
        encoded = repr(value).encode()
    return excerpt(encoded, env.settings.result_max_bytes)
