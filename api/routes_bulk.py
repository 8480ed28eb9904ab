"""POST /api/jobs/bulk: pause, resume or trigger every job a label selector selects (issue 25, item 4)
in one namespace (`?namespace=`, default `default`: issue 41).

Scope write; api.shell_authority decides for each selected job as for its single action (admin for a
shell job; for a resume or trigger, for a job whose chain runs one too), every job checked before
anything changes, and again under each job's row lock. Each job's
change is its own write, audited as the single action is (paused, resumed, triggered); a job the
action does not change (already paused, ended) is listed with why. At most MAX_JOBS jobs a call.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from aiohttp import web
from msgspec import Meta

from api.auth import principal_of
from api.bodies import PAGE_PAYLOAD_BYTES, decode, respond
from api.namespace_query import NAMESPACE, query_namespace
from api.routing import BODY_ERRORS, DB_ERRORS, Route
from api.shell_authority import check_chain, guard_for
from api.state import BACKENDS
from cronos import selectors
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import TERMINAL_STATUSES, Job
from cronos.store.jobs import JobStore

MAX_JOBS = 1000
Action = Literal["pause", "resume", "trigger"]
_STATUS = {"pause": "paused", "resume": "active"}


class BulkBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    selector: Annotated[
        str,
        Meta(max_length=4000, description="a label selector (GET /api/jobs)",
             extra_json_schema={"pattern": selectors.SELECTOR_PATTERN}),  # checked by cronos.selectors.parse
    ]  # fmt: skip
    action: Action


class BulkItem(msgspec.Struct, kw_only=True, omit_defaults=True):
    job_id: int
    name: str
    status: Annotated[str, Meta(description="the job's status after the action")]
    run_id: Annotated[int | None, Meta(description="trigger: the run queued")] = None
    reason: Annotated[str | None, Meta(description="unchanged: why")] = None


class BulkOut(msgspec.Struct, kw_only=True):
    action: Action
    selector: str
    matched: Annotated[int, Meta(description="jobs the selector selected")]
    changed: list[BulkItem]
    unchanged: list[BulkItem]


async def _selected(store: JobStore, path: str, namespace: str) -> list[Job]:
    jobs: list[Job] = []
    after = 0
    while True:
        page, more = await store.list_jobs(None, after, 500, PAGE_PAYLOAD_BYTES, path, namespace)
        jobs.extend(page)
        if len(jobs) > MAX_JOBS:
            raise InvalidInput("$.selector", f"selects more than {MAX_JOBS} jobs: narrow it")
        if not more or not page:
            return jobs
        after = page[-1].id


async def bulk(request: web.Request) -> web.Response:
    principal = principal_of(request)
    namespace = query_namespace(request)
    body = await decode(request, BulkBody)
    path = selectors.jsonpath(selectors.parse(body.selector, "$.selector"))
    backends = request.app[BACKENDS]
    store = await backends.jobs()
    jobs = await _selected(store, path, namespace)
    for job in jobs:  # every refusal before any change
        guard_for(principal, body.action, job.id)(job.kind)
        await check_chain(await backends.pool(), principal, body.action, job.id)
    changed, unchanged = [], []
    for job in jobs:
        guard = guard_for(principal, body.action, job.id)
        item = BulkItem(job_id=job.id, name=job.name, status=job.status)
        try:
            if body.action == "trigger":
                run = await store.trigger(job.id, actor=principal.name, guard=guard)
                changed.append(msgspec.structs.replace(item, run_id=run.id))
                continue
            target = _STATUS[body.action]
            if job.status == target or job.status in TERMINAL_STATUSES:
                unchanged.append(msgspec.structs.replace(item, reason=f"already {job.status}"))
                continue
            done = await store.set_status(job.id, target, actor=principal.name, guard=guard)
            changed.append(msgspec.structs.replace(item, status=done.status))
        except (NotFound, Conflict) as exc:  # deleted or ended meanwhile
            unchanged.append(msgspec.structs.replace(item, reason=str(exc)))
    out = BulkOut(action=body.action, selector=body.selector, matched=len(jobs), changed=changed, unchanged=unchanged)
    return respond(out)


ROUTES = (
    Route("POST", "/api/jobs/bulk", bulk,
          f"Pause, resume or trigger every job a label selector selects (at most {MAX_JOBS}); each job's change "
          "audited as its single action; the answer lists what changed and what did not, and why",
          body=BulkBody, response=BulkOut, errors=(*BODY_ERRORS, *DB_ERRORS), query=(NAMESPACE,)),
)  # fmt: skip
