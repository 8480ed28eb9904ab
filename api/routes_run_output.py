"""A run's output (docs/run-output.md): a page of its lines from an offset, and a follow mode that
streams them as they come (Server-Sent Events), resuming from an offset, ending once the run ended
and every line was sent. Scope read."""

from __future__ import annotations

import time
from datetime import datetime

import msgspec
from aiohttp import web

from api.bodies import MAX_LIMIT, path_id, query_limit, respond
from api.output_follow import FOLLOWERS
from api.routing import DB_ERRORS, ID, Query, Route
from api.state import BACKENDS
from cronos.errors import InvalidInput, NotFound
from cronos.lifecycle import TERMINAL
from cronos.models import RunState
from cronos.run_output import Stream
from cronos.store import run_output

KEEPALIVE_S = 15.0  # a follower with nothing new hears a comment this often (proxies keep it open)
MAX_OFFSET = 2**31 - 1

_encoder = msgspec.json.Encoder()


class OutputLineOut(msgspec.Struct, kw_only=True):
    seq: int  # the line's number in its run, from 0; the next page starts after the last one
    at: datetime
    stream: Stream  # log, stdout, stderr, http, or cut (the line stating what the bound cut out)
    line: str


class RunOutputPage(msgspec.Struct, kw_only=True):
    run_id: int
    state: str
    ended: bool  # the run has ended: a page shorter than `limit` holds its last line
    lines: list[OutputLineOut]
    next_offset: int  # `offset` of the next page (past the last line read)


def ended(state: str) -> bool:
    return RunState(state) in TERMINAL


def _offset(request: web.Request) -> int:
    """`offset`, else an EventSource's Last-Event-ID (the last line it had) + 1, else 0."""
    raw, name = request.query.get("offset"), "offset"
    if raw is None and (last := request.headers.get("Last-Event-ID")) is not None:
        if last.isascii() and last.isdigit() and len(last) <= 10:
            return min(int(last) + 1, MAX_OFFSET)
        raise InvalidInput("Last-Event-ID", "must be the number of a line (an integer >= 0)")
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or int(raw) > MAX_OFFSET:
        raise InvalidInput(name, f"must be an integer between 0 and {MAX_OFFSET}")
    return int(raw)


def _lines(page: run_output.OutputPage) -> list[OutputLineOut]:
    return [OutputLineOut(seq=x.seq, at=x.at, stream=x.stream, line=x.line) for x in page.lines]


async def get_output(request: web.Request) -> web.Response:
    run_id, offset, limit = path_id(request), _offset(request), query_limit(request, MAX_LIMIT)
    page = await run_output.page(await request.app[BACKENDS].pool(), run_id, offset, limit)
    lines = _lines(page)
    following = lines[-1].seq + 1 if lines else offset
    return respond(
        RunOutputPage(run_id=run_id, state=page.state, ended=ended(page.state), lines=lines, next_offset=following)
    )


async def follow_output(request: web.Request) -> web.StreamResponse:
    run_id, offset = path_id(request), _offset(request)
    pool = await request.app[BACKENDS].pool()
    page = await run_output.page(pool, run_id, offset, MAX_LIMIT)  # a 404 before the stream starts
    response = web.StreamResponse(headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.content_type = "text/event-stream"
    await response.prepare(request)
    followers, quiet = request.app[FOLLOWERS], 0.0
    while True:
        for line in _lines(page):
            await response.write(b"id: %d\ndata: %s\n\n" % (line.seq, _encoder.encode(line)))
            offset = line.seq + 1
        if len(page.lines) < MAX_LIMIT:
            if ended(page.state):  # read with its lines: its executor wrote them all before it ended
                end = {"state": page.state, "next_offset": offset}
                await response.write(b"event: end\ndata: %s\n\n" % _encoder.encode(end))
                break
            started = time.monotonic()
            await followers.wait(run_id)
            quiet = 0.0 if page.lines else quiet + time.monotonic() - started
            if quiet >= KEEPALIVE_S:
                await response.write(b": still running\n\n")
                quiet = 0.0
        page = await run_output.page(pool, run_id, offset, MAX_LIMIT)
    await response.write_eof()
    return response


_OFFSET = Query(
    "offset",
    "the number of the first line wanted (a page's `next_offset`); default 0",
    schema={"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
)
ROUTES = (
    Route("GET", f"/api/runs/{ID}/output", get_output,
          "A run's output: up to `limit` lines from `offset` on, each with its number, instant and stream; "
          "past its bound, the first and last lines and a `cut` line saying what was left out",
          response=RunOutputPage, errors=(NotFound, InvalidInput, *DB_ERRORS),
          query=(_OFFSET, Query("limit", f"lines at most, 1..{MAX_LIMIT} (default {MAX_LIMIT})", maximum=MAX_LIMIT))),
    Route("GET", f"/api/runs/{ID}/output/follow", follow_output,
          "Follow a run's output as Server-Sent Events: each line an event (`id` its number, `data` the line as "
          "JSON) from `offset` (or Last-Event-ID + 1) on, as its executor writes it; an `end` event once the "
          "run ended and every line was sent",
          content_type="text/event-stream", errors=(NotFound, InvalidInput, *DB_ERRORS), query=(_OFFSET,)),
)  # fmt: skip
