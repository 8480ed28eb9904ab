"""The `selector` query parameter of job listings (cronos.selectors: the grammar and its checks)."""

from __future__ import annotations

from aiohttp import web

from api.routing import Query
from cronos import selectors

SELECTOR = Query(
    "selector",
    "only jobs whose labels match this selector: comma-separated requirements that all hold — `key=value`, "
    "`key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (set), `!key` (not set); e.g. `team=data,env!=prod`",
    schema={"type": "string", "pattern": selectors.SELECTOR_PATTERN},
)


def query_selector(request: web.Request) -> str | None:
    """The query's selector as the store's SQL/JSON path (None: none given); 422 naming `selector`."""
    raw = request.query.get("selector")
    return None if raw is None else selectors.jsonpath(selectors.parse(raw))
