"""A job's history and revisions are bounded in bytes (issue 36): a page ends early at
CRONOS_HISTORY_PAGE_MAX_BYTES and its cursor goes on from there, a value past
CRONOS_HISTORY_VALUE_MAX_BYTES is shown as its size and digest, and one revision is read whole.
Against a real API and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from cronos.settings import Settings
from tests.integration.api_client import Api, running_api

PAGE_BYTES = 32_768
VALUE_BYTES = 4096


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    bounded = msgspec.structs.replace(
        settings, history_page_max_bytes=PAGE_BYTES, history_value_max_bytes=VALUE_BYTES
    )
    async with running_api(bounded) as client:
        yield client


async def _raw(api: Api, path: str) -> tuple[int, dict[str, Any]]:
    """The response's size in bytes and its body."""
    async with api.session.get(api.base + path) as resp:
        raw = await resp.read()
        assert resp.status == 200, raw[:300]
        return len(raw), json.loads(raw)


async def _patched(api: Api, times: int, blob_bytes: int) -> int:
    """A job changed `times` times, each change a payload of about `blob_bytes`."""
    job = await api.create(status="paused")
    for i in range(times):
        body = {"payload": {"action": "reindex", "blob": f"{i:04d}" + "x" * blob_bytes}}
        reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json=body)
        assert reply.status == 200, reply.body
    return int(job["id"])


@pytest.mark.parametrize(("view", "key"), [("history", "id"), ("revisions", "number")])
async def test_a_page_ends_at_the_byte_bound_and_its_cursor_goes_on(api: Api, view: str, key: str) -> None:
    # 3 KB payloads: under the value bound, so whole; 40 changes of them are far past one page.
    job_id = await _patched(api, 40, 3000)
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        size, page = await _raw(api, f"/api/jobs/{job_id}/{view}?limit=500" + (f"&cursor={cursor}" if cursor else ""))
        assert size <= PAGE_BYTES, (size, len(page["items"]))
        assert page["items"], page
        seen += [item[key] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages > 2
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 41  # creation + 40 changes


async def test_large_values_are_summarised_in_the_lists_and_whole_in_one_revision(api: Api) -> None:
    job_id = await _patched(api, 2, 20_000)
    payload = {"action": "reindex", "blob": "0001" + "x" * 20_000}

    _size, history = await _raw(api, f"/api/jobs/{job_id}/history")
    newest, older = history["items"][0], history["items"][1]
    summary = newest["after"]["payload"]
    assert summary["truncated"] is True and 20_000 < summary["bytes"] < 20_100, summary
    assert set(summary) == {"truncated", "bytes", "hash"} and len(summary["hash"]) == 16
    assert newest["before"]["payload"] == older["after"]["payload"]  # the same value, the same hash
    assert newest["before"]["payload"]["hash"] != summary["hash"]
    assert newest["after"]["name"] == "Sync Database Indexes"  # small values stay as they are

    _size, revisions = await _raw(api, f"/api/jobs/{job_id}/revisions")
    listed = revisions["items"][0]
    assert listed["number"] == 3 and listed["changes"]["payload"] == summary
    assert revisions["items"][-1]["changes"]["payload"] == {"action": "reindex"}  # small: whole

    _size, whole = await _raw(api, f"/api/jobs/{job_id}/revisions/3")
    assert whole["changes"]["payload"] == payload and whole["fields"] == ["payload"]
    for missing in (f"/api/jobs/{job_id}/revisions/4", f"/api/jobs/{job_id}/revisions/99999999999",
                    "/api/jobs/999999/revisions/1"):  # fmt: skip
        assert (await api.call("GET", missing)).status == 404, missing
