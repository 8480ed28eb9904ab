"""/api/channels: notification channels (admin writes, read lists) and their deliveries.

Secrets are write-only (cronos.notify.channels): a webhook's signing secret, a Slack URL and an
SMTP password are shown as `***`, and a webhook URL's path and query to a non-admin reader;
`***` in a PATCH keeps the stored value. A webhook channel
created without a secret gets one drawn here, shown in the creation's response only. Channel
URLs and SMTP hosts pass the SSRF guard's literal check here and the full one at send time.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import msgspec
from aiohttp import web
from msgspec import UNSET, UnsetType

from api.auth import principal_of
from api.bodies import decode, decode_cursor, encode_cursor, path_id, query_limit, respond, utc_now
from api.errors import invalid_input
from api.namespace_query import NAMESPACE, query_namespace
from api.routes_tokens import audit_page
from api.routing import BODY_ERRORS, DB_ERRORS, ID, PAGE, Route
from api.schemas_tokens import AuditList
from api.state import BACKENDS
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.notify import channels as ch
from cronos.notify import message as msg
from cronos.redact import SECRET
from cronos.store.audit import AuditStore
from cronos.store.notify import ChannelStore, Delivery


class ChannelPatch(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The fields to change; the others keep their value (`smtp` and `quiet_hours` are replaced
    whole). Leave `url` out, or send it as shown (`***` for a Slack URL), to keep it; a `secret`
    or SMTP `password` sent as `***` keeps the stored one. The kind stays (delete and add a channel
    to change it); the fields of another kind (`smtp` of a webhook channel...) are ignored."""

    name: ch.Name | UnsetType = UNSET
    url: ch.UrlOrStars | UnsetType = UNSET
    secret: ch.SecretOrStars | UnsetType = UNSET  # a webhook always has one (rotate: send a new one)
    smtp: ch.Smtp | UnsetType = UNSET
    jobs: ch.Jobs | UnsetType | None = UNSET
    queues: ch.Queues | UnsetType | None = UNSET
    selector: ch.Selector | UnsetType | None = UNSET
    events: ch.Events | UnsetType = UNSET
    after_failures: ch.AfterFailures | UnsetType = UNSET
    rate_limit_s: ch.RateLimit | UnsetType = UNSET
    quiet_hours: ch.Quiet | UnsetType | None = UNSET
    enabled: bool | UnsetType = UNSET


class ChannelCreated(ch.Channel, kw_only=True):
    # Drawn here when the request gave none (webhook channels): shown this once.
    webhook_secret: str | UnsetType = UNSET


class ChannelList(msgspec.Struct, kw_only=True):
    items: list[ch.Channel]


class DeliveryList(msgspec.Struct, kw_only=True):
    """A channel's deliveries, newest first: `pending` (due_at: next try), `sent`, `failed` (gave
    up: last_error says why) or `suppressed` (reason: a rule)."""

    items: list[Delivery]
    next_cursor: str | None


# The create body: one Struct per kind, told apart by `kind` (the document's oneOf).
CHANNEL_IN: type[Any] = ch.ChannelIn  # type: ignore[assignment]  # a union of Structs is a type to msgspec
_WRITABLE = ch.ChannelFields.__struct_fields__


def _allow(request: web.Request) -> tuple[str, ...]:
    return request.app[BACKENDS].settings.http_allow_nets


def _store(pool: Any) -> ChannelStore:
    return ChannelStore(pool)


async def list_channels(request: web.Request) -> web.Response:
    namespace = query_namespace(request)
    channels = [c for c in await _store(await request.app[BACKENDS].pool()).all() if c.namespace == namespace]
    admin = principal_of(request).admin
    return respond(ChannelList(items=[ch.shown(c, admin=admin) for c in channels]))


async def create_channel(request: web.Request) -> web.Response:
    body = ch.flat(await decode(request, CHANNEL_IN))
    ch.check(body, _allow(request))
    if body.url == SECRET or (body.smtp is not None and body.smtp.password == SECRET) or body.secret == SECRET:
        raise InvalidInput("$", f"{SECRET} stands for a stored secret; a new channel has none")
    drawn = None
    if body.kind == "webhook" and body.secret is None:
        drawn = ch.new_secret(secrets.token_bytes(32))
        body = msgspec.structs.replace(body, secret=drawn)
    store = _store(await request.app[BACKENDS].pool())
    channel = await store.create(body, actor=principal_of(request).name, namespace=query_namespace(request))
    out = msgspec.structs.asdict(ch.shown(channel, admin=True))  # an admin's route
    return respond(ChannelCreated(**out, webhook_secret=drawn if drawn is not None else UNSET), status=201)


async def get_channel(request: web.Request) -> web.Response:
    channel = await _store(await request.app[BACKENDS].pool()).get(path_id(request))
    return respond(ch.shown(channel, admin=principal_of(request).admin))


def _patched(patch: ChannelPatch, stored: ch.Channel, allow: tuple[str, ...]) -> ch.ChannelFields:
    fields: dict[str, Any] = {name: getattr(stored, name) for name in _WRITABLE}
    given = {name: getattr(patch, name) for name in ChannelPatch.__struct_fields__}
    fields.update({name: value for name, value in given.items() if value is not UNSET})
    try:
        merged = ch.restore(msgspec.convert(msgspec.to_builtins(fields), ch.ChannelFields), stored)
        new = ch.flat(msgspec.convert(ch.tagged(merged), ch.ChannelIn))
    except msgspec.ValidationError as exc:
        raise invalid_input(exc) from exc
    ch.check(new, allow)
    return new


async def patch_channel(request: web.Request) -> web.Response:
    patch = await decode(request, ChannelPatch)
    allow = _allow(request)
    store = _store(await request.app[BACKENDS].pool())
    channel = await store.update(
        path_id(request), lambda stored: _patched(patch, stored, allow), actor=principal_of(request).name
    )
    return respond(ch.shown(channel, admin=True))  # an admin's route


async def delete_channel(request: web.Request) -> web.Response:
    await _store(await request.app[BACKENDS].pool()).delete(path_id(request), actor=principal_of(request).name)
    return web.Response(status=204)


async def channel_history(request: web.Request) -> web.Response:
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    entries = await AuditStore(await request.app[BACKENDS].pool()).history("channel", before, limit)
    return respond(audit_page(entries, limit))


async def channel_deliveries(request: web.Request) -> web.Response:
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    items = await _store(await request.app[BACKENDS].pool()).deliveries(path_id(request), before, limit)
    cursor = encode_cursor(items[-1].id) if len(items) == limit else None
    return respond(DeliveryList(items=items, next_cursor=cursor))


async def test_channel(request: web.Request) -> web.Response:
    backends = request.app[BACKENDS]
    settings = backends.settings
    now: datetime = utc_now()
    message = msg.build(
        event={"kind": msg.TEST, "occurred_at": now, "detail": {"requested_by": principal_of(request).name}},
        job=None, run=None, tick=None, link=msg.console_link(settings.console_url or settings.api_url, None, None),
    )  # fmt: skip
    delivery = await _store(await backends.pool()).test(path_id(request), message)
    return respond(delivery, status=202)


ROUTES = (
    Route("GET", "/api/channels", list_channels,
          "Notification channels (secrets shown as ***; to a non-admin, a webhook URL's path and query too)",
          response=ChannelList, errors=(InvalidInput, *DB_ERRORS), query=(NAMESPACE,)),
    Route("POST", "/api/channels", create_channel,
          "Create a notification channel: a signed webhook, a Slack incoming webhook or SMTP email, for every "
          "job or the jobs or queues listed, with its events and rules", status=201, body=CHANNEL_IN,
          response=ChannelCreated, errors=(*BODY_ERRORS, NotFound, Conflict, *DB_ERRORS), scope="admin",
          query=(NAMESPACE,)),
    Route("GET", "/api/channels/history", channel_history,
          "Channel creations, changes and deletions, newest first: who (actor), when, the channel before and "
          "after (secrets shown as ***; its id and name in detail)", response=AuditList,
          errors=(InvalidInput, *DB_ERRORS), query=PAGE, scope="admin"),
    Route("GET", f"/api/channels/{ID}", get_channel,
          "One channel (secrets shown as ***; to a non-admin, a webhook URL's path and query too)", response=ch.Channel,
          errors=(NotFound, *DB_ERRORS)),
    Route("PATCH", f"/api/channels/{ID}", patch_channel,
          "Change a channel; a secret or URL sent back as shown (***) keeps the stored one",
          body=ChannelPatch, response=ch.Channel, errors=(*BODY_ERRORS, NotFound, Conflict, *DB_ERRORS),
          scope="admin"),
    Route("DELETE", f"/api/channels/{ID}", delete_channel, "Delete a channel and its deliveries", status=204,
          errors=(NotFound, *DB_ERRORS), scope="admin"),
    Route("GET", f"/api/channels/{ID}/deliveries", channel_deliveries,
          "The channel's deliveries, newest first: pending (with its next try), sent, failed (gave up) or "
          "suppressed by a rule (with the reason)", response=DeliveryList, errors=(NotFound, InvalidInput, *DB_ERRORS),
          query=PAGE),
    Route("POST", f"/api/channels/{ID}/test", test_channel,
          "Queue a test notification on the channel; the leader sends it (see its deliveries)", status=202,
          response=Delivery, errors=(NotFound, *DB_ERRORS), scope="admin"),
)  # fmt: skip
