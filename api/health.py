"""/health (the seed contract) and /metrics (Prometheus)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.backends import CONNECT_TIMEOUT_S, Backends
from api.bodies import respond
from api.routing import HEALTH_DOWN, Route
from api.schemas import Health
from api.state import BACKENDS
from cronos.errors import BackendUnavailable
from cronos.metrics import BACKEND_UP, JOBS, REGISTRY
from cronos.models import JOB_STATUSES


async def postgres_up(backends: Backends) -> bool:
    try:
        await (await backends.jobs()).ping(CONNECT_TIMEOUT_S)
    except BackendUnavailable:
        return False
    return True


async def redis_up(backends: Backends) -> bool:
    try:
        await backends.redis_call(backends.redis.ping())
    except BackendUnavailable:
        return False
    return True


async def health(request: web.Request) -> web.Response:
    backends = request.app[BACKENDS]
    db, cache = await asyncio.gather(postgres_up(backends), redis_up(backends))
    BACKEND_UP.labels("postgresql").set(int(db))
    BACKEND_UP.labels("redis").set(int(cache))
    body = Health(
        status="ok" if db and cache else "degraded",
        database="PostgreSQL Connected" if db else "PostgreSQL Disconnected",
        cache="Redis Connected" if cache else "Redis Disconnected",
    )
    return respond(body, status=200 if db and cache else 503)


async def metrics(request: web.Request) -> web.Response:
    try:  # cheap: one GROUP BY over a small table, only when Prometheus scrapes
        counts = await (await request.app[BACKENDS].jobs()).count_by_status()
    except BackendUnavailable:
        pass  # keep the last known values; the scrape itself must not fail
    else:
        for status in JOB_STATUSES:
            JOBS.labels(status).set(counts.get(status, 0))
    return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})


ROUTES = (
    Route("GET", "/health", health, "Liveness and backends (seed contract)", response=Health, also=(HEALTH_DOWN,),
          scope="public"),
    # CRONOS_METRICS_TOKEN (checked without the database, so a scrape works while it is down) or a read token.
    Route("GET", "/metrics", metrics, "Prometheus metrics of this process", content_type="text/plain",
          scope="metrics"),
)  # fmt: skip
