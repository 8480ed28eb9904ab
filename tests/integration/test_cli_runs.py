"""`cronos runs list` over every job (filters, paging past short pages, the cursor) and `cronos runs
retry`, run through `cronos.cli.main` against a real API and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.cli import main
from cronos.client.runs_cli import instant
from cronos.settings import Settings
from cronos.store.run_views import SCAN
from tests.integration.api_client import Api, running_api

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def api(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        monkeypatch.setenv("CRONOS_API_URL", client.base)
        monkeypatch.delenv("CRONOS_API_TOKEN", raising=False)
        yield client


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = await asyncio.to_thread(main, list(argv))
    except SystemExit as exc:  # argparse's refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


async def _ledger(api: Api, pool: asyncpg.Pool) -> dict[str, int]:
    """Jobs `etl` (queue default) and `gpu` (queue gpu); SCAN + 500 runs of etl, one in 100 failed, one in
    300 manual; then 3 failed runs of gpu (the newest)."""
    etl, gpu = (await api.create(name="etl"))["id"], (await api.create(name="gpu", queue="gpu"))["id"]
    await pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at, error)"
        " SELECT $1, $2::timestamptz + g * interval '1 min', 1,"
        " CASE WHEN g % 300 = 0 THEN 'manual' ELSE 'schedule' END,"
        " CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'completed' END, $2::timestamptz, now(),"
        " CASE WHEN g % 100 = 0 THEN 'disk full' END FROM generate_series(1, $3) g",
        etl,
        DAY0,
        SCAN + 500,
    )
    await pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at, error)"
        " SELECT $1, $2::timestamptz + g * interval '1 h', 1, 'schedule', 'failed', $2::timestamptz, now(), 'oom'"
        " FROM generate_series(1, 3) g",
        gpu,
        DAY0,
    )
    return {"etl": etl, "gpu": gpu}


def _ids(table: str) -> list[int]:
    return [int(line.split()[0]) for line in table.splitlines()[1:]]


async def test_runs_list_filters_every_job_and_pages_on(
    api: Api, pg_pool: asyncpg.Pool, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = await _ledger(api, pg_pool)
    failed = [r["id"] for r in await pg_pool.fetch("SELECT id FROM runs WHERE state = 'failed' ORDER BY id DESC")]

    code, out, err = await cli(capsys, "runs", "list", "--state", "failed", "--limit", "4")
    assert code == 0 and _ids(out) == failed[:4], out
    assert re.split(r"\s{2,}", out.splitlines()[0])[:5] == ["ID", "SCHEDULED FOR", "ATTEMPT", "TRIGGER", "STATE"]
    assert "oom" in out and err.startswith("more runs: add --cursor ")
    cursor = err.split()[-1]
    code, out, _err = await cli(capsys, "runs", "list", "--state", "failed", "--limit", "4", "--cursor", cursor)
    assert code == 0 and _ids(out) == failed[4:8]

    code, out, err = await cli(capsys, "runs", "list", "--queue", "gpu", "--json")
    assert code == 0 and [r["job_id"] for r in json.loads(out)] == [jobs["gpu"]] * 3 and err == ""
    code, out, _err = await cli(capsys, "runs", "list", "etl", "--state", "failed", "--state", "skipped")
    assert code == 0 and _ids(out) == failed[3:23]  # the job by name, 20 by default
    since = (DAY0 + timedelta(minutes=SCAN)).isoformat()
    code, out, _err = await cli(capsys, "runs", "list", "--job", str(jobs["etl"]), "--since", since, "--limit", "1000")
    assert code == 0 and len(_ids(out)) == 501  # ticks at or after `since`: minutes SCAN..SCAN+500

    # manual runs: 8 among SCAN + 500; the newest SCAN hold 6 of them, so the first API page is short
    # and the command goes on to the next one
    manual = [r["id"] for r in await pg_pool.fetch("SELECT id FROM runs WHERE trigger = 'manual' ORDER BY id DESC")]
    code, out, err = await cli(capsys, "runs", "list", "--trigger", "manual", "--limit", "8")
    assert code == 0 and _ids(out) == manual


async def test_runs_retry_queues_the_next_attempt_and_refuses_in_one_line(
    api: Api, pg_pool: asyncpg.Pool, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = await _ledger(api, pg_pool)
    run_id = await pg_pool.fetchval("SELECT max(id) FROM runs WHERE job_id = $1", jobs["gpu"])
    code, out, _err = await cli(capsys, "runs", "retry", str(run_id))
    assert code == 0 and out.startswith("Queued run ") and "attempt 2 of job" in out, out
    code, out, err = await cli(capsys, "runs", "retry", str(run_id))
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "409" in err and "has not ended" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("runs", "list", "--since", "yesterday"),
        ("runs", "list", "--state", "done"),
        ("runs", "list", "--limit", "0"),
        ("runs", "list", "--trigger", "cron"),
        ("runs", "retry", "abc"),
        ("runs", "list", "etl", "--job", "gpu"),
    ],
)
async def test_bad_options_are_one_line_and_a_non_zero_exit(
    api: Api, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, out, err = await cli(capsys, *argv)
    assert code != 0 and out == "" and len(err.splitlines()) == 1, err


async def test_a_bad_queue_is_the_apis_422_in_one_line(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = await cli(capsys, "runs", "list", "--queue", "no spaces")
    assert code == 1 and err.startswith("cronos: 422: queue:") and len(err.splitlines()) == 1, err


def test_since_takes_a_duration_back_from_now_or_a_time() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert instant("24h", now) == datetime(2026, 2, 28, 12, tzinfo=UTC)
    assert instant("90s", now) == now - timedelta(seconds=90)
    assert instant("2026-02-01T00:00:00Z") == datetime(2026, 2, 1, tzinfo=UTC)
    assert instant("2026-02-01T01:00:00+01:00") == datetime(2026, 2, 1, tzinfo=UTC)
    assert instant("2026-02-01") == datetime(2026, 2, 1, tzinfo=UTC)  # no offset: UTC
