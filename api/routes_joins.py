"""GET /api/jobs/{id}/joins: a join child's runs explained by its parents (issue 40, item 5).

Each logical tick a child of a join (`chain.join`) heard of: the parent runs that ended it and
their outcomes, when it times out, and what the join did (ran, skipped, dropped), why, and the
child run it made (cronos.store.joins). The ticks API shows that run as it shows any run.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from api.bodies import MAX_LIMIT, path_id, query_limit, respond
from api.routing import DB_ERRORS, ID, Query, Route
from api.state import BACKENDS
from cronos.errors import InvalidInput, NotFound
from cronos.store.joins import JoinRecord, JoinStore


class JoinList(msgspec.Struct, kw_only=True):
    """The job's joins, newest tick first."""

    items: list[JoinRecord]


async def job_joins(request: web.Request) -> web.Response:
    job_id = path_id(request)
    limit = query_limit(request)
    backends = request.app[BACKENDS]
    await (await backends.jobs()).get(job_id)  # NotFound: 404
    return respond(JoinList(items=await JoinStore(await backends.pool()).of_job(job_id, limit)))


ROUTES = (
    Route("GET", f"/api/jobs/{ID}/joins", job_joins,
          "A join child's ticks, newest first (docs/chains.md): the parent runs that ended each, their outcomes, "
          "its deadline, and what the join did (ran, skipped, dropped), why, and the child run it made",
          response=JoinList, errors=(NotFound, InvalidInput, *DB_ERRORS),
          query=(Query("limit", f"at most this many ticks, 1..{MAX_LIMIT}", maximum=MAX_LIMIT),)),
)  # fmt: skip
