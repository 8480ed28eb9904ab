"""What the API tells about a job no live executor can run (executor.routing): the create/update
warning (the job is stored all the same: an executor may come later) and the reason a queued run
of it waits.

Reads the executors' presence from Redis (as /api/cluster does; the API writes nothing there);
with Redis away the job is stored without the check, and a run shows no reason.
"""

from __future__ import annotations

from api.backends import Backends
from cronos import presence
from cronos.errors import BackendUnavailable
from cronos.models import Job
from cronos.schedule_lint import LintWarning

UNSERVED_ACTION = "unserved_action"  # the warning's code (a task's action, or shell jobs)


def needs_of(job: Job) -> presence.Needs | None:
    """What a run of `job` needs of its executor beside the queue; None when any executor runs it."""
    action = job.payload.get("action") if job.kind == "task" else None
    if isinstance(action, str):
        return presence.Needs(job.queue, action)
    return presence.Needs(job.queue, shell=True) if job.kind == "shell" else None


async def unserved(backends: Backends, job: Job) -> str | None:
    """Why `job`'s runs wait (presence.unserved_message); None when some live executor runs them,
    or when not known now (Redis away: no reason rather than a false one)."""
    needs = needs_of(job)
    if needs is None:
        return None
    try:
        found = await backends.redis_call(presence.nodes(backends.redis, backends.keys))
    except BackendUnavailable:
        return None
    return None if presence.servers(found, needs) else presence.unserved_message(needs)


async def action_warnings(backends: Backends, job: Job) -> list[LintWarning]:
    """What to tell the caller about who can run `job`; empty when some live executor can."""
    message = await unserved(backends, job)
    if message is None:
        return []
    if job.kind == "shell":
        until, hint = "until one runs with CRONOS_ALLOW_SHELL=1", "with CRONOS_ALLOW_SHELL=1"
    else:
        until = "until one imports a module that registers it"
        hint = f"importing the module that registers {job.payload.get('action')!r}"
    return [
        LintWarning(
            code=UNSERVED_ACTION,
            message=f"{message} {until}",
            suggestion=f"start an executor of queue {job.queue!r} {hint}",
        )
    ]
