"""Run output (cronos/run_output.py, executor/output.py) written by a real executor to PostgreSQL:
each run's own lines, bounded, scrubbed of its secrets."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import asyncpg
import msgspec
from aiohttp import web

import cronos
from cronos.run_output import LINE_BYTES, cut_text
from cronos.settings import Settings
from cronos.store import run_output
from executor.service import Executor
from tests.integration.http_server import serve
from tests.integration.ledger_helpers import Harness

SECRET = "s3cr3t-Value-0451"
BOTH_WROTE = asyncio.Event()
WROTE: set[int] = set()


@cronos.task("test.chatty", replace=True)
async def _chatty(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Writes its name by every way a task can, interleaved with another run of it."""
    name = payload["name"]
    ctx.logger.info("log %s one", name)
    print(f"print {name}")
    WROTE.add(ctx.run_id)
    if len(WROTE) == 2:
        BOTH_WROTE.set()
    await asyncio.wait_for(BOTH_WROTE.wait(), 10)  # the other run wrote meanwhile
    print(f"stderr {name}", file=sys.stderr)
    logging.getLogger("some.library").warning("library %s", name)
    await asyncio.to_thread(print, f"thread {name}")
    ctx.logger.info("log %s two", name)


@cronos.task("test.chatty_sync", replace=True)
def _chatty_sync(payload: dict[str, Any], ctx: cronos.RunContext) -> None:  # in a thread
    print(f"sync print {payload['name']}")
    ctx.logger.warning("sync log %s", payload["name"])


@cronos.task("test.leaky", replace=True)
async def _leaky(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    print(f"the key is {payload['api_key']}")
    ctx.logger.info("calling with %s", payload["api_key"])
    print(f'and as JSON: {{"api_key": "{payload["api_key"]}"}}')


async def lines_of(pool: asyncpg.Pool, run_id: int) -> list[tuple[str, str]]:
    page = await run_output.page(pool, run_id, 0, 10_000)
    assert [line.seq for line in page.lines] == sorted(line.seq for line in page.lines)
    return [(line.stream, line.line) for line in page.lines]


async def test_two_concurrent_runs_each_keep_only_their_own_lines(harness: Harness, settings: Settings) -> None:
    BOTH_WROTE.clear()
    WROTE.clear()
    first = await harness.job(payload={"action": "test.chatty", "name": "alpha"})
    second = await harness.job(payload={"action": "test.chatty", "name": "beta"})
    third = await harness.job(payload={"action": "test.chatty_sync", "name": "gamma"})
    for job in (first, second, third):
        await harness.queue(job)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 3}
    for job, name in ((first, "alpha"), (second, "beta")):
        (run,) = await harness.runs(job)
        assert await lines_of(harness.pool, run.id) == [
            ("log", f"INFO cronos.task.test.chatty: log {name} one"),
            ("stdout", f"print {name}"),
            ("stderr", f"stderr {name}"),
            ("log", f"WARNING some.library: library {name}"),
            ("stdout", f"thread {name}"),
            ("log", f"INFO cronos.task.test.chatty: log {name} two"),
        ]
    (run,) = await harness.runs(third)
    assert await lines_of(harness.pool, run.id) == [
        ("stdout", "sync print gamma"),
        ("log", "WARNING cronos.task.test.chatty_sync: sync log gamma"),
    ]


async def test_a_secret_in_a_tasks_output_never_reaches_storage(harness: Harness, settings: Settings) -> None:
    job = await harness.job(payload={"action": "test.leaky", "api_key": SECRET})
    await harness.queue(job)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 1}
    (run,) = await harness.runs(job)
    assert await lines_of(harness.pool, run.id) == [
        ("stdout", "the key is ***"),
        ("log", "INFO cronos.task.test.leaky: calling with ***"),
        ("stdout", 'and as JSON: {"api_key": "***"}'),
    ]
    stored = await harness.pool.fetchval("SELECT count(*) FROM run_output WHERE strpos(line, $1) > 0", SECRET)
    assert stored == 0


async def test_a_run_that_writes_nothing_stores_nothing(harness: Harness, settings: Settings) -> None:
    job = await harness.job(payload={"action": "noop"})
    await harness.queue(job)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 1}
    assert await harness.pool.fetchval("SELECT count(*) FROM run_output") == 0


async def test_a_shell_run_past_its_bound_keeps_head_and_tail_and_says_what_was_cut(
    harness: Harness, settings: Settings
) -> None:
    script = "i=1; while [ $i -le 5000 ]; do echo line $i; i=$((i+1)); done; echo oops >&2"
    job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script]})
    await harness.queue(job)
    bounded = msgspec.structs.replace(settings, allow_shell=True, output_max_lines=100, output_max_bytes=1_000_000)
    async with Executor(bounded) as ex:
        assert await ex.run_once() == {"completed": 1}
    (run,) = await harness.runs(job)
    lines = await lines_of(harness.pool, run.id)
    assert len(lines) == 101
    assert lines[:50] == [("stdout", f"line {i}") for i in range(1, 51)]
    stream, cut = lines[50]
    assert stream == "cut" and cut.startswith("[cronos] 4901 lines (") and "cut here" in cut
    assert lines[51:] == [*(("stdout", f"line {i}") for i in range(4952, 5001)), ("stderr", "oops")]
    # Storage holds the bound, not what went past it: the lines that left the tail are gone.
    assert await harness.pool.fetchval("SELECT count(*) FROM run_output WHERE run_id = $1", run.id) == 101


async def test_an_http_runs_output_is_its_responses_status_headers_and_body_head(
    harness: Harness, settings: Settings
) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        headers = {"Set-Cookie": "session=c00kie-value", "X-Request-Id": "r-1"}
        text = f"accepted\nwith {request.headers['X-Api-Key']}\n"
        return web.Response(status=201, text=text, headers=headers)

    runner, port = await serve(handle, "127.0.0.1")
    try:
        job = await harness.job(
            kind="http", payload={"url": f"http://127.0.0.1:{port}/hook", "headers": {"X-Api-Key": SECRET}}
        )
        await harness.queue(job)
        async with Executor(settings) as ex:
            assert await ex.run_once() == {"completed": 1}
    finally:
        await runner.cleanup()
    (run,) = await harness.runs(job)
    lines = await lines_of(harness.pool, run.id)
    assert lines[0] == ("http", f"POST http://127.0.0.1:{port}/hook -> HTTP 201 Created")
    assert ("http", "Set-Cookie: ***") in lines and ("http", "X-Request-ID: r-1") in lines
    assert lines[-2:] == [("http", "accepted"), ("http", "with ***")]


async def test_a_shell_run_printing_10_mb_keeps_its_exact_head_and_tail(harness: Harness, settings: Settings) -> None:
    text = " a line of a shell job printing ten megaby"  # 49 bytes a line with its number, 50 with the newline
    job = await harness.job(kind="shell", payload={"argv": ["seq", "-f", f"%07.0f{text}", "0", "199999"]})
    await harness.queue(job)
    defaults = msgspec.structs.replace(settings, allow_shell=True, output_max_lines=2000, output_max_bytes=2**20)
    async with Executor(defaults) as ex:
        assert await ex.run_once() == {"completed": 1}
    (run,) = await harness.runs(job)
    lines = await lines_of(harness.pool, run.id)
    assert lines[:1000] == [("stdout", f"{i:07d}{text}") for i in range(1000)]
    assert lines[1000] == ("cut", cut_text(198_000, 198_000 * 49))  # 9.9 MB said cut, to the byte
    assert lines[1001:] == [("stdout", f"{i:07d}{text}") for i in range(199_000, 200_000)]
    assert await harness.pool.fetchval("SELECT count(*) FROM run_output WHERE run_id = $1", run.id) == 2001


async def test_a_secret_a_shell_job_writes_in_two_pieces_never_reaches_storage(
    harness: Harness, settings: Settings
) -> None:
    # Two pipe reads apart (the sleep): the secret's first part ends a read; the second time where
    # a line without a newline is taken (at LINE_BYTES), which kept the secret's start once.
    first, second = SECRET[:7], SECRET[7:]
    fill = "y" * (LINE_BYTES - len(first))
    script = (
        'printf "key=%s" "$A"; sleep 0.3; printf "%s used\\n" "$B";'  # a secret across two reads
        ' printf "%s" "$F$A"; sleep 0.3; printf "%s\\n" "$B"'  # ... where a long line is taken
    )
    env = {"API_TOKEN": SECRET, "A": first, "B": second, "F": fill}
    job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script], "env": env})
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        assert await ex.run_once() == {"completed": 1}
    (run,) = await harness.runs(job)
    lines = [line for _, line in await lines_of(harness.pool, run.id)]
    assert lines[0] == "key=*** used" and lines[-1].endswith("***")
    assert SECRET not in "".join(lines) and first not in "".join(lines)  # nor across two stored lines
