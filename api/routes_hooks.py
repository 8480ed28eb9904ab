"""Trigger URLs (issue 40, item 7): /api/jobs/{id}/triggers (create, list, revoke) and the hook,
`POST /hooks/{trigger_id}`, that lets a CI system start a run without an API token.

The secret travels in `Authorization: Bearer` (or, for a signed trigger, not at all: Standard
Webhooks headers keyed with it), never in the URL: proxies and access logs keep URLs, and this
path then holds nothing worth redacting. The hook looks the trigger up (404 unknown or revoked,
the same answer), authenticates (401), counts the call against its rate (429 with Retry-After),
refuses a replayed webhook-id (409), then runs api.routes_trigger.run_now as principal
`trigger:<id>`: the body is the manual trigger's, checked the same way (422 naming the field), and
a shell job runs only from a trigger an admin made (its principal holds admin then; a write
token cannot make a trigger on a shell job at all: the same 403 as triggering it).
"""

from __future__ import annotations

import time
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from api.auth import PRINCIPAL, Denied, Principal, bearer, principal_of, unauthorized
from api.bodies import decode, path_id, respond
from api.routes_jobs import JOB, _authorize
from api.routes_trigger import TriggerBody, run_now
from api.routing import BODY_ERRORS, DB_ERRORS, ID, Route
from api.schemas import RunOut
from api.schemas_tokens import TokenName
from api.state import BACKENDS
from cronos import trigger_hooks
from cronos.errors import Conflict, NotFound, TooManyRequests
from cronos.scopes import effective
from cronos.store.triggers import Presented, Trigger, TriggerStore

HOOK = f"/hooks/{ID}"
ACTOR_PREFIX = "trigger:"  # a ':' no token name holds: the audit trail tells the two apart


class TriggerCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: TokenName
    signed: Annotated[bool, Meta(description="calls must carry Standard Webhooks signature headers keyed "
                                 "with the secret (which then never travels); otherwise "
                                 "`Authorization: Bearer <secret>`")] = False  # fmt: skip
    rate_per_minute: Annotated[int, Meta(ge=1, le=10_000, description="calls a minute; past it 429")] = 60


class TriggerCreated(Trigger, kw_only=True):
    url: str  # the hook's path
    secret: str  # shown this once; only its SHA-256 is stored (and, signed, the key an HMAC check needs)


class TriggerList(msgspec.Struct, kw_only=True):
    items: list[Trigger]


async def create_trigger(request: web.Request) -> web.Response:
    job_id = path_id(request)
    principal, guard, _check = await _authorize(request, "trigger", job_id)
    body = await decode(request, TriggerCreate)
    store = TriggerStore(await request.app[BACKENDS].pool())
    kind = (await (await request.app[BACKENDS].jobs()).get(job_id)).kind
    guard(kind)  # a write token makes no trigger of a shell job: it would start what it may not
    trigger, secret = await store.create(job_id, body.name, signed=body.signed, admin=principal.admin,
                                         rate_per_minute=body.rate_per_minute, actor=principal.name)  # fmt: skip
    out = TriggerCreated(**msgspec.structs.asdict(trigger), url=f"/hooks/{trigger.id}", secret=secret)
    return respond(out, status=201)


async def list_triggers(request: web.Request) -> web.Response:
    job_id = path_id(request)
    await (await request.app[BACKENDS].jobs()).get(job_id)  # 404 without the job
    return respond(TriggerList(items=await TriggerStore(await request.app[BACKENDS].pool()).list_for(job_id)))


async def revoke_trigger(request: web.Request) -> web.Response:
    store = TriggerStore(await request.app[BACKENDS].pool())
    await store.revoke(path_id(request), path_id(request, "trigger"), actor=principal_of(request).name)
    return web.Response(status=204)


async def _authenticate(request: web.Request, presented: Presented) -> None:
    """401 unless the call carries the trigger's secret (or, signed, its signature)."""
    if presented.signing_secret is None:
        given = bearer(request.headers.get("Authorization"))
        if not given or not presented.bearer_matches(given):
            raise unauthorized("send the trigger's secret as `Authorization: Bearer <secret>`", invalid=bool(given))
        return
    body = await request.read()
    why = trigger_hooks.signature_refusal(presented.signing_secret, request.headers, body, time.time())
    if why is not None:
        raise unauthorized(why, invalid=True)


async def _admit(request: web.Request, trigger: Trigger) -> None:
    """429 past the trigger's rate; 409 for a signed call's webhook-id seen within the tolerance."""
    backends = request.app[BACKENDS]
    index, retry_after = trigger_hooks.window(time.time())
    key = backends.keys.trigger_rate(trigger.id, index)
    async with backends.redis.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        pipe.expire(key, trigger_hooks.WINDOW_S * 2)
        count, _ = await backends.redis_call(pipe.execute())
    if count > trigger.rate_per_minute:
        raise Denied(429, "too-many-requests", f"trigger {trigger.id} takes {trigger.rate_per_minute} calls a "
                     f"minute; retry in {retry_after} s", headers={"Retry-After": str(retry_after)})  # fmt: skip
    if trigger.signed:
        seen = backends.keys.trigger_seen(trigger.id, request.headers["webhook-id"])
        if not await backends.redis_call(backends.redis.set(seen, 1, nx=True, ex=trigger_hooks.TOLERANCE_S * 2)):
            raise Conflict(f"webhook-id {request.headers['webhook-id'][:100]!r} was already handled")


async def fire_hook(request: web.Request) -> web.Response:
    presented = await TriggerStore(await request.app[BACKENDS].pool()).live(path_id(request))
    if presented is None:
        raise NotFound("no live trigger with this id")
    await _authenticate(request, presented)
    trigger = presented.trigger
    await _admit(request, trigger)
    scopes = ["admin"] if trigger.admin else ["write"]
    request[PRINCIPAL] = Principal(f"{ACTOR_PREFIX}{trigger.id}", effective(scopes))
    return await run_now(request, trigger.job_id)


TRIGGERS = f"{JOB}/triggers"
ROUTES = (
    Route("POST", TRIGGERS, create_trigger,
          "Create a trigger URL of the job: its secret is in this answer only. Scope write; admin for a shell "
          "job or one whose chain runs one", status=201, body=TriggerCreate, response=TriggerCreated,
          errors=(NotFound, *BODY_ERRORS, *DB_ERRORS)),
    Route("GET", TRIGGERS, list_triggers, "The job's trigger URLs, live and revoked, without secrets",
          response=TriggerList, errors=(NotFound, *DB_ERRORS)),
    Route("DELETE", f"{TRIGGERS}/{{trigger:[0-9]+}}", revoke_trigger,
          "Revoke a trigger URL: its calls get 404 at once", status=204, errors=(NotFound, *DB_ERRORS)),
    Route("POST", HOOK, fire_hook,
          "Start a run of the trigger's job (no API token): `Authorization: Bearer <secret>`, or for a signed "
          "trigger the webhook-id, webhook-timestamp and webhook-signature headers. The body is "
          "POST /api/jobs/{id}/trigger's. 401 bad secret or signature, 409 replayed webhook-id, 429 over the "
          "rate (Retry-After)", status=202, body=TriggerBody, body_required=False, response=RunOut,
          errors=(NotFound, Conflict, TooManyRequests, *BODY_ERRORS, *DB_ERRORS), scope="public",
          own_auth="no secret, a wrong one, or (signed) a missing, stale or wrong signature"),
)  # fmt: skip
