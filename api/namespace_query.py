"""The `namespace` query parameter of the collection routes (cronos.namespaces: names and the default).

A collection route (a listing, a create, a bulk action by selector) acts in the namespace its query
names, `default` when it names none, so every request written before namespaces acts as it did.
A route on one object by its id acts in that object's own namespace and ignores the parameter.
"""

from __future__ import annotations

from aiohttp import web

from api.routing import Query
from cronos import namespaces

NAMESPACE = Query(
    namespaces.FIELD,
    f"the namespace to act in (default `{namespaces.DEFAULT}`)",
    schema={"type": "string", "pattern": namespaces.PATTERN, "default": namespaces.DEFAULT},
)


def query_namespace(request: web.Request) -> str:
    """The namespace the request names (`default` when none); 422 naming `namespace` when malformed."""
    return namespaces.of_query(request.query.get(namespaces.FIELD))
