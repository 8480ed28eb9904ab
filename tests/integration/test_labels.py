"""Labels, owner and selectors (issue 25, item 4) through the API and the CLI, against a real API and
PostgreSQL: jobs carry them, GET /api/jobs?selector= finds them (checked against cronos.selectors as
the oracle), POST /api/jobs/bulk acts on them (each change audited), and the selector query is answered
through the GIN index."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import asyncpg
import msgspec
import pytest

from cronos import selectors
from cronos.cli import main
from cronos.settings import Settings
from cronos.store.queries import jobs as jobs_q
from cronos.store.tokens import TokenStore
from tests.integration.api_client import Api, running_api

FLEET = {
    "etl-orders": {"team": "data", "env": "prod", "tier": "gold"},
    "etl-users": {"team": "data", "env": "staging"},
    "web-cache": {"team": "web", "tier": "silver"},
    "plain": {},
}


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
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


async def _fleet(api: Api) -> dict[str, int]:
    ids = {}
    for name, labels in FLEET.items():
        job = await api.create(name=name, cron_expression="@daily", labels=labels, owner=f"{name}@example.com")
        assert job["labels"] == labels and job["owner"] == f"{name}@example.com"
        ids[name] = job["id"]
    return ids


async def _selected(api: Api, selector: str) -> set[str]:
    reply = await api.call("GET", "/api/jobs?" + urlencode({"selector": selector}))
    assert reply.status == 200, reply.body
    return {job["name"] for job in reply.body["items"]}


async def test_jobs_carry_labels_and_selectors_find_them(api: Api) -> None:
    ids = await _fleet(api)
    for text in ["team=data", "team=data,env!=prod", "env!=prod", "tier in (gold,silver)", "tier notin (gold)",
                 "tier", "!tier", "team=data,team=web", "app.example.com/x"]:  # fmt: skip
        expected = {n for n, labels in FLEET.items() if selectors.matches(selectors.parse(text), labels)}
        assert await _selected(api, text) == expected, text
    # paging carries the selector on
    page = await api.call("GET", "/api/jobs?selector=team&limit=2")
    assert len(page.body["items"]) == 2 and page.body["next_cursor"], page.body
    rest = await api.call("GET", "/api/jobs?" + urlencode({"selector": "team", "cursor": page.body["next_cursor"]}))
    assert [j["name"] for j in rest.body["items"]] == ["web-cache"]

    bad = await api.call("GET", "/api/jobs?" + urlencode({"selector": "team in ()"}))
    assert bad.status == 422 and bad.body["field"] == "selector", bad.body
    for labels, field in [({"team": "a b"}, "$.labels.team"), ({"-x": "y"}, "$.labels.-x"), ({"k": 1}, None)]:
        reply = await api.call("POST", "/api/jobs", json={"name": "bad", "cron_expression": "@daily",
                                                          "payload": {"action": "noop"}, "labels": labels})  # fmt: skip
        assert reply.status == 422, reply.body
        if field is not None:
            assert reply.body["field"] == field, reply.body
    patched = await api.call("PATCH", f"/api/jobs/{ids['plain']}", json={"labels": {"team": "web"}, "owner": None})
    assert patched.status == 200 and (patched.body["labels"], patched.body["owner"]) == ({"team": "web"}, None)
    assert await _selected(api, "team=web") == {"web-cache", "plain"}
    refused = await api.call("PATCH", f"/api/jobs/{ids['plain']}", json={"labels": {"team": "x" * 64}})
    assert refused.status == 422 and refused.body["field"] == "$.labels.team", refused.body


async def test_bulk_actions_change_what_the_selector_selects_each_audited(
    api: Api, settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    ids = await _fleet(api)
    paused = await api.call("POST", "/api/jobs/bulk", json={"selector": "team=data", "action": "pause"})
    assert paused.status == 200, paused.body
    assert (paused.body["matched"], [i["name"] for i in paused.body["changed"]]) == (2, ["etl-orders", "etl-users"])
    assert all(i["status"] == "paused" for i in paused.body["changed"]) and paused.body["unchanged"] == []
    again = await api.call("POST", "/api/jobs/bulk", json={"selector": "team", "action": "pause"})
    assert [i["name"] for i in again.body["changed"]] == ["web-cache"]
    assert [(i["name"], i["reason"]) for i in again.body["unchanged"]] == [
        ("etl-orders", "already paused"), ("etl-users", "already paused")]  # fmt: skip
    resumed = await api.call("POST", "/api/jobs/bulk", json={"selector": "env=prod", "action": "resume"})
    assert [(i["name"], i["status"]) for i in resumed.body["changed"]] == [("etl-orders", "active")]
    triggered = await api.call("POST", "/api/jobs/bulk", json={"selector": "tier", "action": "trigger"})
    runs = {i["name"]: i["run_id"] for i in triggered.body["changed"]}
    assert set(runs) == {"etl-orders", "web-cache"} and all(runs.values())
    rows = await pg_pool.fetch("SELECT job_id, trigger FROM runs WHERE id = ANY($1::bigint[])", list(runs.values()))
    assert {(r["job_id"], r["trigger"]) for r in rows} == {(ids["etl-orders"], "manual"), (ids["web-cache"], "manual")}
    audit = await pg_pool.fetch("SELECT job_id, action FROM audit_log WHERE subject = 'job' AND action <> 'created'")
    assert sorted((a["action"], a["job_id"]) for a in audit) == sorted(
        [("paused", ids["etl-orders"]), ("paused", ids["etl-users"]), ("paused", ids["web-cache"]),
         ("resumed", ids["etl-orders"]), ("triggered", ids["etl-orders"]), ("triggered", ids["web-cache"])]
    )  # fmt: skip
    for body, field in [({"selector": "", "action": "pause"}, "$.selector"),
                        ({"selector": "team=", "action": "stop"}, "$.action"),
                        ({"selector": "a b", "action": "pause"}, "$.selector")]:  # fmt: skip
        reply = await api.call("POST", "/api/jobs/bulk", json=body)
        assert reply.status == 422 and reply.body["field"] == field, reply.body

    # A shell job among the selected: only admin may act on it, and nothing changes before the refusal.
    tokens = TokenStore(pg_pool)
    writer = (await tokens.create("writer", ("write",), None, actor="cli"))[1]
    admin = (await tokens.create("boss", ("admin",), None, actor="cli"))[1]
    async with running_api(msgspec.structs.replace(settings, allow_shell=True)) as guarded:
        shell = {"name": "sh", "cron_expression": "@daily", "kind": "shell", "payload": {"argv": ["true"]},
                 "labels": {"team": "data"}}  # fmt: skip
        assert (await guarded.call("POST", "/api/jobs", json=shell, token=admin)).status == 201
        body = {"selector": "team=data", "action": "resume"}
        refused = await guarded.call("POST", "/api/jobs/bulk", json=body, token=writer)
        assert refused.status == 403 and "`admin`" in refused.body["detail"], refused.body
        assert await pg_pool.fetchval("SELECT status FROM jobs WHERE id = $1", ids["etl-users"]) == "paused"
        done = await guarded.call("POST", "/api/jobs/bulk", json=body, token=admin)
        assert [i["name"] for i in done.body["changed"]] == ["etl-users"], done.body


async def test_the_cli_sets_lists_and_acts_by_selector(
    api: Api, capsys: pytest.CaptureFixture[str], pg_pool: asyncpg.Pool
) -> None:
    await _fleet(api)
    code, out, err = await cli(capsys, "jobs", "create", "--name", "nightly", "--cron-expression", "0 * * * *",
                               "--payload", '{"action": "noop"}', "--labels", "team=data,env=dev", "--owner", "ana",
                               "--status", "paused", "--json")  # fmt: skip
    assert code == 0, err
    created = json.loads(out)
    assert (created["labels"], created["owner"]) == ({"team": "data", "env": "dev"}, "ana")
    code, out, err = await cli(capsys, "jobs", "list", "-l", "team=data,env!=prod", "--json")
    assert code == 0 and [j["name"] for j in json.loads(out)] == ["etl-users", "nightly"], err
    code, out, err = await cli(capsys, "jobs", "list", "-l", "team in (")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "selector" in err, err
    code, out, err = await cli(capsys, "jobs", "bulk", "pause", "-l", "env=dev")
    assert code == 0 and "1 job matched, 0 changed" in out and "already paused" in out, out
    code, out, err = await cli(capsys, "jobs", "bulk", "pause", "-l", "team=web")
    assert code == 0 and "web-cache" in out and "1 changed" in out, out

    # backfill from the command line: a dry run lists, the real one queues
    await pg_pool.execute("UPDATE job_revisions SET at = at - interval '1 day' WHERE job_id = $1", created["id"])
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    span = ("--from", (end - timedelta(hours=3)).isoformat(), "--to", end.isoformat())
    code, out, err = await cli(capsys, "jobs", "backfill", "nightly", *span, "--dry-run", "--pace", "5")
    assert code == 0, err
    assert out.splitlines()[0].split()[:4] == ["TICK", "STATE", "ATTEMPT", "ACTION"]
    assert out.strip().endswith("3 ticks in the range, 3 chosen (missing); would queue 3 at 5/s"), out
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", created["id"]) == 0
    code, out, err = await cli(capsys, "jobs", "backfill", str(created["id"]), *span, "--mode", "all", "--json")
    assert code == 0 and json.loads(out)["queued"] == 3, err
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE trigger = 'backfill'") == 3
    code, out, err = await cli(capsys, "jobs", "backfill", "nightly", "--from", "2026-01-01T00:00:00", "--to", "x")
    assert code != 0 and "offset" in err, err


async def test_a_selector_is_answered_through_the_labels_index(pg_pool: asyncpg.Pool) -> None:
    """5,000 jobs, 50 labelled team=data: past the page's slice (read by id), the rest of the page
    is read through the GIN index, never every job, with PostgreSQL's generic plan (a prepared
    statement's, after five runs) as with a custom one (tests/integration/test_job_pages.py: the
    slice and the pages themselves)."""
    await pg_pool.execute(
        "INSERT INTO jobs (name, cron_expression, kind, payload, labels)"
        " SELECT 'job-' || g, '@daily', 'task', '{\"action\": \"noop\"}',"
        " jsonb_build_object('team', CASE WHEN g % 100 = 0 THEN 'data' ELSE 'web-' || g % 7 END, 'n', g::text)"
        " FROM generate_series(1, 5000) g"
    )
    await pg_pool.execute("ANALYZE jobs")
    path = selectors.jsonpath(selectors.parse("team=data,env!=prod"))
    async with pg_pool.acquire() as conn:
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            plan = await conn.fetchval(
                f"EXPLAIN (FORMAT JSON) {jobs_q.JOB_LIST_SELECTED_INDEXED}", None, 0, 100, 2**40, path, "default"
            )
            text = json.dumps(plan)
            assert "jobs_labels" in text and '"Seq Scan"' not in text and "BitmapAnd" not in text, (mode, text)
        rows = await conn.fetch(jobs_q.JOB_LIST_SELECTED_INDEXED, None, 0, 100, 2**40, path, "default")
    assert len(rows) == 50 and all(r["labels"]["team"] == "data" for r in rows)
