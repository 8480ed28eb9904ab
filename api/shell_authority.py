"""Who may let a shell job run: the one rule, applied by every route that can (issue 36, item 2).

A shell job runs commands on the executors' hosts, so only a token with scope admin may act on
one: create it, change it, pause, resume, delete or trigger it, cancel its run. A job's chain
runs after each successful run of it (cronos.store.chains), so an action that can make a job run
-- now (trigger, backfill, retry) or again on its schedule (change, resume, toggle: a toggle may
resume) -- lets every shell job down its chain run too, and needs admin as well. Pausing,
deleting, rotating a secret or cancelling a run of a task job lets nothing run: only the job's
own kind counts there, so a write token keeps those on the task jobs above an admin's shell job.

`refusal` is the rule (pure); `guard_for` applies it to a stored job's kind under its row lock
(cronos.store.jobs.Guard), `check_chain` to its chain before the write. An admin making a
shell job the child of a task job grants no one else its runs.
"""

from __future__ import annotations

from typing import Literal

import asyncpg

from api.auth import Principal, forbidden
from cronos.store.chains import shell_descendant
from cronos.store.jobs import Guard

Action = Literal[
    "create", "change", "delete", "pause", "resume", "toggle", "trigger", "backfill", "retry",
    "rotate-secret", "cancel",
]  # fmt: skip
# The actions that can make the job run, now or again: its chain's shell jobs count too.
STARTS_RUNS: frozenset[Action] = frozenset({"create", "change", "resume", "toggle", "trigger", "backfill", "retry"})


def refusal(action: Action, job_id: int | None, kind: str | None, shell_below: tuple[int, str] | None) -> str | None:
    """Why a caller without scope admin may not do `action` to job `job_id` of `kind` (None: not
    known yet), whose chain runs `shell_below` (the first shell job down it, or None); None: it may."""
    job = "a job" if job_id is None else f"job {job_id}"
    if kind == "shell":
        return f"a {action} of {job} (a shell job)"
    if action in STARTS_RUNS and shell_below is not None:
        return f"a {action} of {job} (its chain runs shell job {shell_below[0]})"
    return None


def guard_for(principal: Principal, action: Action, job_id: int | None = None) -> Guard:
    """The job store's guard for `action`: called with the job's kind (stored, or as it would become)."""

    def check(kind: str) -> None:
        if not principal.admin and (why := refusal(action, job_id, kind, None)) is not None:
            raise forbidden(principal, "admin", why)

    return check


async def check_chain(db: asyncpg.Pool | asyncpg.Connection, principal: Principal, action: Action, job_id: int) -> None:
    """403 when `action` could make job `job_id` run and a shell job is down its chain."""
    if principal.admin or action not in STARTS_RUNS:
        return
    if (why := refusal(action, job_id, None, await shell_descendant(db, job_id))) is not None:
        raise forbidden(principal, "admin", why)
