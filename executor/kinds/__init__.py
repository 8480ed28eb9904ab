"""Kinds of work, matched on the job's `kind`: each runs one claimed run and returns its
result excerpt, or raises (`RunFailed` for an expected failure; anything else fails the
run with its traceback).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cronos.models import JobKind
from cronos.run_usage import Meter
from cronos.store.runs import ClaimedRun
from cronos.tasks import Cancellation
from executor.kinds import http, shell, task
from executor.kinds.base import Env, RunFailed, excerpt

__all__ = ["Env", "RunFailed", "excerpt", "execute"]

# Each gets the run's cancellation signal: a task sees it (ctx.cancelled), a shell command gets
# SIGTERM, an http run still waiting for its host stops waiting; a request under way has no way to
# hear it (it is aborted when the grace ends). Each fills in the run's `Meter` with what it
# measures (cronos.run_usage).
Runner = Callable[[ClaimedRun, Env, Cancellation, Meter], Awaitable[str | None]]
RUNNERS: dict[JobKind, Runner] = {"task": task.run, "http": http.run, "shell": shell.run}


async def execute(
    run: ClaimedRun, env: Env, cancellation: Cancellation | None = None, meter: Meter | None = None
) -> str | None:
    return await RUNNERS[run.kind](run, env, cancellation or Cancellation(), meter or Meter())
