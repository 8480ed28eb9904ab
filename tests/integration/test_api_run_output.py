"""GET /api/runs/{id}/output and its follow mode, against a real executor writing a run's output
while it runs: readers get its lines as they come (several at once, resuming from an offset),
then the end; never a secret."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import cronos
from cronos.settings import Settings
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.ledger_helpers import Harness
from tests.integration.test_executor_pipeline import running
from tests.integration.test_run_output import SECRET
from tests.waiting import wait_for

GO_ON: dict[str, asyncio.Event] = {}


@cronos.task("test.drip", replace=True)
async def _drip(payload: dict[str, Any], ctx: cronos.RunContext) -> None:
    """Writes `first`, waits until the test saw it, then writes `second` and ends."""
    print("first")
    ctx.logger.info("token %s", payload["token"])
    await asyncio.wait_for(GO_ON[payload["gate"]].wait(), 20)
    print("second")


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def follow(api: Api, run_id: int, offset: int, seen: list[Any]) -> None:
    """Every event of a follow, as (name, data), into `seen` as it comes, until the stream ends."""
    async with api.session.get(f"{api.base}/api/runs/{run_id}/output/follow?offset={offset}") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
        name = "message"
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append((name, json.loads(line.removeprefix("data: "))))
                name = "message"


async def test_followers_get_a_running_runs_lines_as_they_come_then_the_end(
    api: Api, harness: Harness, settings: Settings
) -> None:
    GO_ON["live"] = asyncio.Event()
    job = await harness.job(payload={"action": "test.drip", "gate": "live", "token": SECRET})
    token = await harness.queue(job)
    async with Executor(settings) as ex, running(ex):
        await wait_for(lambda: _state(harness, token.run_id, "running"), timeout=10)
        readers: list[list[Any]] = [[], [], []]
        follows = [
            asyncio.create_task(follow(api, token.run_id, offset, seen))
            for offset, seen in zip((0, 0, 1), readers, strict=True)
        ]
        try:
            # Both lines written so far reach every reader while the run still runs.
            await wait_for(lambda: _have(readers, [2, 2, 1]), timeout=10)
            assert await _state(harness, token.run_id, "running")
            assert [d["line"] for _, d in readers[0]] == ["first", "INFO cronos.task.test.drip: token ***"]
            GO_ON["live"].set()
            await asyncio.wait_for(asyncio.gather(*follows), 15)
        finally:
            for task in follows:
                task.cancel()
    lines = ["first", "INFO cronos.task.test.drip: token ***", "second"]
    for seen, start in zip(readers, (0, 0, 1), strict=True):
        assert [d["line"] for name, d in seen if name == "message"] == lines[start:]
        assert [d["seq"] for name, d in seen if name == "message"] == list(range(start, 3))
        assert seen[-1] == ("end", {"state": "completed", "next_offset": 3})
    page = await api.call("GET", f"/api/runs/{token.run_id}/output?offset=1&limit=1")
    assert page.status == 200
    assert page.body["lines"][0]["line"].endswith("token ***") and page.body["lines"][0]["stream"] == "log"
    assert (page.body["state"], page.body["ended"], page.body["next_offset"]) == ("completed", True, 2)
    whole = await api.call("GET", f"/api/runs/{token.run_id}/output")
    assert SECRET not in json.dumps(whole.body) and len(whole.body["lines"]) == 3


async def test_output_of_a_run_that_does_not_exist_is_a_404_problem(api: Api) -> None:
    for path in ("/api/runs/999999/output", "/api/runs/999999/output/follow"):
        reply = await api.call("GET", path)
        assert reply.status == 404 and reply.headers["Content-Type"].startswith("application/problem+json")


@pytest.mark.parametrize("query", ["offset=-1", "offset=x", "offset=99999999999", "limit=0", "limit=501"])
async def test_a_bad_offset_or_limit_is_a_422_naming_it(api: Api, harness: Harness, query: str) -> None:
    job = await harness.job()
    token = await harness.queue(job)
    reply = await api.call("GET", f"/api/runs/{token.run_id}/output?{query}")
    assert reply.status == 422 and reply.body["field"] == query.split("=")[0], reply.body


async def _have(readers: list[list[Any]], counts: list[int]) -> bool:
    return all(len(seen) >= n for seen, n in zip(readers, counts, strict=True))


async def _state(harness: Harness, run_id: int, state: str) -> bool:
    return await harness.pool.fetchval("SELECT state FROM runs WHERE id = $1", run_id) == state


_ = aiohttp  # the follow reads the API's own session
