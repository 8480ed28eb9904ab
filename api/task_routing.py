"""The create/update-time warning of a task job whose action no live executor of its queue
serves (executor.routing): the job is stored all the same (an executor may come later), and the
answer says why its runs would wait.

Reads the executors' presence from Redis (as /api/cluster does; the API writes nothing there);
with Redis away the job is stored without the check.
"""

from __future__ import annotations

from api.backends import Backends
from api.cluster import unserved_message
from cronos import presence
from cronos.errors import BackendUnavailable
from cronos.models import Job
from cronos.schedule_lint import LintWarning

UNSERVED_ACTION = "unserved_action"  # the warning's code


async def action_warnings(backends: Backends, job: Job) -> list[LintWarning]:
    """What to tell the caller about `job`'s task action; empty when some live executor runs it."""
    action = job.payload.get("action") if job.kind == "task" else None
    if not isinstance(action, str):
        return []
    try:
        found = await backends.redis_call(presence.nodes(backends.redis, backends.keys))
    except BackendUnavailable:
        return []  # not known now: no warning rather than a false one
    if presence.servers(found, job.queue, action):
        return []
    return [
        LintWarning(
            code=UNSERVED_ACTION,
            message=f"{unserved_message(job.queue, action)} until one imports a module that registers it",
            suggestion=f"start an executor of queue {job.queue!r} importing the module that registers {action!r}",
        )
    ]
