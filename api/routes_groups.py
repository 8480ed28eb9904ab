"""/api/concurrency-groups: the groups jobs share slots of (cronos.store.groups): list them, show one
with its holders and waiting runs, create one or set its limit (PUT), delete an unused one."""

from __future__ import annotations

import re
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from api.auth import principal_of
from api.bodies import decode, respond
from api.namespace_query import NAMESPACE, query_namespace
from api.routing import BODY_ERRORS, DB_ERRORS, Route
from api.state import BACKENDS
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import GROUP_PATTERN
from cronos.store.group_admin import Group, GroupStore, GroupView

Limit = Annotated[int, Meta(ge=1, le=100_000, description="how many runs of the group's jobs may run at once")]


class GroupPut(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    limit: Limit


class GroupList(msgspec.Struct, kw_only=True):
    items: list[Group]


def group_name(request: web.Request) -> str:
    """The path's group name; one no group can have is not a resource (404, as the router answers
    for any other character)."""
    name = request.match_info["name"]
    if not re.fullmatch(GROUP_PATTERN, name):
        raise NotFound(f"no concurrency group can be named that: a name is {GROUP_RULE}")
    return name


async def list_groups(request: web.Request) -> web.Response:
    store = GroupStore(await request.app[BACKENDS].pool())
    return respond(GroupList(items=await store.list_groups(query_namespace(request))))


async def get_group(request: web.Request) -> web.Response:
    name = group_name(request)
    return respond(await GroupStore(await request.app[BACKENDS].pool()).get(name))


async def put_group(request: web.Request) -> web.Response:
    name = group_name(request)
    body = await decode(request, GroupPut)
    store = GroupStore(await request.app[BACKENDS].pool())
    group, created = await store.put(
        name, body.limit, actor=principal_of(request).name, namespace=query_namespace(request)
    )
    return respond(group, status=201 if created else 200)


async def delete_group(request: web.Request) -> web.Response:
    name = group_name(request)
    await GroupStore(await request.app[BACKENDS].pool()).delete(name, actor=principal_of(request).name)
    return web.Response(status=204)


_PATH = "/api/concurrency-groups/{name:[A-Za-z0-9_.-]+}"
GROUP_RULE = "1-64 letters, digits, '.', '-' or '_'"
ROUTES = (
    Route("GET", "/api/concurrency-groups", list_groups, "Concurrency groups: limit, slots held, runs waiting, jobs",
          response=GroupList, errors=(InvalidInput, *DB_ERRORS), query=(NAMESPACE,)),
    Route("GET", _PATH, get_group, "A concurrency group: its holders (runs with a slot) and waiting runs in order",
          response=GroupView, errors=(NotFound, *DB_ERRORS)),
    Route("PUT", _PATH, put_group, "Create a concurrency group or set its limit (a raise starts waiting runs now)",
          body=GroupPut, response=Group, errors=(*BODY_ERRORS, NotFound, Conflict, *DB_ERRORS), query=(NAMESPACE,),
          also=((201, "created", Group),)),
    Route("DELETE", _PATH, delete_group, "Delete a concurrency group no job names", status=204,
          errors=(NotFound, Conflict, *DB_ERRORS)),
)  # fmt: skip
