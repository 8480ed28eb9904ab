"""/api/namespaces: the namespaces jobs live in (issue 41). Anyone who may read lists them; a cluster
admin (scope admin) creates one (PUT) and deletes an empty one."""

from __future__ import annotations

import msgspec
from aiohttp import web

from api.auth import principal_of
from api.bodies import respond
from api.routing import DB_ERRORS, Route
from api.state import BACKENDS
from cronos import namespaces
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.store.namespaces import Namespace, NamespaceStore


class NamespaceList(msgspec.Struct, kw_only=True):
    items: list[Namespace]


def _name(request: web.Request) -> str:
    """The path's namespace name; one no namespace can have is not a resource (404, as for groups)."""
    name = request.match_info["name"]
    try:
        return namespaces.check(name, "name")
    except InvalidInput:
        raise NotFound(f"no namespace can be named {name[:80]!r}: {namespaces.RULE}") from None


async def list_namespaces(request: web.Request) -> web.Response:
    store = NamespaceStore(await request.app[BACKENDS].pool())
    return respond(NamespaceList(items=await store.list_all()))


async def get_namespace(request: web.Request) -> web.Response:
    return respond(await NamespaceStore(await request.app[BACKENDS].pool()).get(_name(request)))


async def put_namespace(request: web.Request) -> web.Response:
    store = NamespaceStore(await request.app[BACKENDS].pool())
    found, created = await store.create(_name(request), actor=principal_of(request).name)
    return respond(found, status=201 if created else 200)


async def delete_namespace(request: web.Request) -> web.Response:
    await NamespaceStore(await request.app[BACKENDS].pool()).delete(_name(request), actor=principal_of(request).name)
    return web.Response(status=204)


_PATH = "/api/namespaces/{name}"
ROUTES = (
    Route("GET", "/api/namespaces", list_namespaces, "The namespaces, by name", response=NamespaceList,
          errors=DB_ERRORS),
    Route("GET", _PATH, get_namespace, "A namespace", response=Namespace, errors=(NotFound, *DB_ERRORS)),
    Route("PUT", _PATH, put_namespace, "Create a namespace (200 when it exists already)", response=Namespace,
          errors=(NotFound, *DB_ERRORS), also=((201, "created", Namespace),), scope="admin"),
    Route("DELETE", _PATH, delete_namespace, "Delete a namespace that holds no job (`default` stays)", status=204,
          errors=(NotFound, Conflict, *DB_ERRORS), scope="admin"),
)  # fmt: skip
