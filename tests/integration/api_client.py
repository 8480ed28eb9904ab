"""A real API on 127.0.0.1 (ephemeral port) and a client for it, shared by the API tests.

Without a token the client relies on protected mode (loopback, no token exists yet), as
the seed's curl examples do; `token` (or `headers=`) sends `Authorization: Bearer ...`.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from api.service import ApiService
from cronos.settings import Settings
from tests.deploy.manifests import VERSION

SEED_JOB = {"name": "Sync Database Indexes", "cron_expression": "*/5 * * * *", "payload": {"action": "reindex"}}
# GET /health with both backends up: the seed contract's four keys, and the release running.
HEALTHY = {
    "status": "ok",
    "service": "Cronos Distributed Scheduler",
    "database": "PostgreSQL Connected",
    "cache": "Redis Connected",
    "version": VERSION,
}


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any


@dataclass
class Api:
    service: ApiService
    session: aiohttp.ClientSession
    base: str
    token: str | None = None

    async def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        data: bytes | str | io.BytesIO | None = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        sent = dict(headers or {})
        if (token := token or self.token) is not None:
            sent.setdefault("Authorization", f"Bearer {token}")
        async with self.session.request(method, self.base + path, json=json, data=data, headers=sent) as resp:
            raw = await resp.read()
            ctype = resp.headers.get("Content-Type", "")
            body: Any = raw.decode()
            if "json" in ctype and raw:
                body = await resp.json(content_type=None)
            return Reply(resp.status, body, resp.headers)

    async def create(self, **fields: Any) -> dict[str, Any]:
        reply = await self.call("POST", "/api/jobs", json={**SEED_JOB, **fields})
        assert reply.status == 201, reply.body
        return dict(reply.body)

    async def walk(self, path: str, limit: int) -> list[int]:
        """The ids on every page of a listing, following `next_cursor`; no page holds more than `limit`."""
        ids: list[int] = []
        cursor = None
        while True:
            query = f"{path}{'&' if '?' in path else '?'}limit={limit}" + (f"&cursor={cursor}" if cursor else "")
            page = await self.call("GET", query)
            assert page.status == 200 and len(page.body["items"]) <= limit, page.body
            ids += [item["id"] for item in page.body["items"]]
            cursor = page.body["next_cursor"]
            if cursor is None:
                return ids


@contextlib.asynccontextmanager
async def running_api(settings: Settings, *, host: str = "127.0.0.1", token: str | None = None) -> AsyncIterator[Api]:
    async with ApiService(settings, host=host) as service, aiohttp.ClientSession() as session:
        base_host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
        yield Api(service, session, f"http://{base_host}:{service.port}", token)
