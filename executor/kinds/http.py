"""`http` runs: one request carrying the run's identity, so the target can de-duplicate."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from cronos.models import HttpPayload
from cronos.store.runs import ClaimedRun
from cronos.tasks import idempotency_key
from executor.kinds.base import Env, RunFailed, excerpt


def identity_headers(run: ClaimedRun) -> dict[str, str]:
    return {
        "X-Cronos-Job-Id": str(run.job_id),
        "X-Cronos-Run-Id": str(run.id),
        "X-Cronos-Scheduled-For": run.scheduled_for.isoformat(),
        "X-Cronos-Attempt": str(run.attempt),
        "Idempotency-Key": idempotency_key(run.job_id, run.scheduled_for),
    }


def status_expected(status: int, expect: list[int] | int | None) -> bool:
    if expect is None:
        return 200 <= status < 300
    if isinstance(expect, int):
        return status == expect
    return status in expect


async def run(run: ClaimedRun, env: Env) -> str | None:
    try:
        payload = msgspec.convert(run.payload, HttpPayload)
    except msgspec.ValidationError as exc:
        raise RunFailed(f"invalid http payload: {exc}") from exc
    headers = {**payload.headers, **identity_headers(run)}
    body: dict[str, Any] = {}
    if isinstance(payload.body, str):
        body["data"] = payload.body.encode()
    elif payload.body is not None:
        body["data"] = msgspec.json.encode(payload.body)
        headers.setdefault("Content-Type", "application/json")
    timeout = aiohttp.ClientTimeout(total=min(payload.timeout_s or run.timeout_s, run.timeout_s))
    max_bytes = env.settings.result_max_bytes
    try:
        async with env.http.request(
            payload.method,
            payload.url,
            headers=headers,
            allow_redirects=payload.follow_redirects,
            timeout=timeout,
            **body,
        ) as response:
            content = await response.content.read(max_bytes + 1)
            status = response.status
    except aiohttp.ClientError as exc:
        raise RunFailed(f"http request failed: {type(exc).__name__}: {exc}") from exc
    result = f"HTTP {status}\n{excerpt(content, max_bytes)}"
    if not status_expected(status, payload.expect_status):
        raise RunFailed(f"unexpected HTTP status {status} from {payload.method} {payload.url}", result=result)
    return result
