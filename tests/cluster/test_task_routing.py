"""Tasks wired safely, with real processes started in an app's own folder (`myapp/` beside them,
not on PYTHONPATH): `cronos executor --import myapp.tasks` imports from the current directory; two
executors of one queue with different task modules split nothing: every run of `hello` runs on
the executor that has it and none fails; a task action no live executor serves is warned about at
create time, and its runs stay queued and are reported in /api/cluster instead of failing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

from cronos.settings import Settings
from tests.cluster.cli_api import api_process, as_json, cli, ok
from tests.cluster.test_executor_process import Procs, procs  # noqa: F401  (the fixture)
from tests.integration.api_client import running_api
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

TASKS = """
import cronos

@cronos.task("hello")
def hello(payload, ctx):
    return "hello from myapp"
"""
OTHER = """
import cronos

@cronos.task("other")
async def other(payload, ctx):
    return None
"""


def _app(folder: Path) -> None:
    (folder / "myapp").mkdir()
    (folder / "myapp" / "__init__.py").write_text("")
    (folder / "myapp" / "tasks.py").write_text(TASKS)
    (folder / "myapp" / "other.py").write_text(OTHER)


async def test_runs_go_to_the_executor_with_the_action_and_unserved_ones_wait_reported(
    pg_pool: asyncpg.Pool,
    settings: Settings,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    _app(procs.logdir)  # the processes' working directory
    procs.start("leader", "dispatcher")
    has = procs.start("exec-hello", "executor", "--import", "myapp.tasks")
    lacks = procs.start("exec-other", "executor", "--import", "myapp.other")

    async with running_api(settings) as api:

        async def announced() -> dict[str, Any] | None:
            body = (await api.call("GET", "/api/cluster")).body
            found = {n["node_id"]: n for n in body["nodes"] if n["role"] == "executor"}
            return found if {has, lacks} <= set(found) else None

        executors = await wait_for(announced, timeout=30, interval=0.2, what="both executors in /api/cluster")
        assert "hello" in executors[has]["actions"] and "hello" not in executors[lacks]["actions"]
        assert "other" in executors[lacks]["actions"] and executors[has]["queues"] == ["default"]

        served = await api.call(
            "POST", "/api/jobs", {"name": "hello", "cron_expression": "* * * * * *", "payload": {"action": "hello"}}
        )
        assert served.status == 201 and served.body["warnings"] == [], served.body
        orphan = await api.call(
            "POST", "/api/jobs", {"name": "orphan", "cron_expression": "* * * * * *", "payload": {"action": "nobody"}}
        )
        assert orphan.status == 201, orphan.body
        assert [(w["code"], w["message"]) for w in orphan.body["warnings"]] == [
            ("unserved_action", "no live executor of queue 'default' serves action 'nobody': its runs wait queued"
             " until one imports a module that registers it")
        ]  # fmt: skip
        changed = await api.call("PATCH", f"/api/jobs/{served.body['id']}", {"timeout_s": 30})
        assert changed.status == 200 and changed.body["warnings"] == []

        async def states(job_id: int) -> list[asyncpg.Record]:
            return await pg_pool.fetch("SELECT state, node_id, error FROM runs WHERE job_id = $1", job_id)

        async def routed() -> bool:
            done = [r for r in await states(served.body["id"]) if r["state"] == "completed"]
            return len(done) >= 6 and bool(procs.events("exec-other", "token.handed_over"))

        await wait_for(routed, timeout=45, interval=0.2, what="6 hello runs done and one handed over by exec-other")

        async def reported() -> list[dict[str, Any]]:
            return [u for u in (await api.call("GET", "/api/cluster")).body["unserved"] if u["action"] == "nobody"]

        unserved = await wait_for(reported, timeout=20, interval=0.2, what="action 'nobody' reported unserved")
        assert unserved[0]["queue"] == "default" and set(unserved[0]["reported_by"]) <= {has, lacks}

    hello_runs = await states(served.body["id"])
    assert {r["state"] for r in hello_runs} <= {"completed", "running", "queued"}, hello_runs
    assert {r["node_id"] for r in hello_runs} <= {has, None}, hello_runs  # never claimed by exec-other
    orphan_runs = await states(orphan.body["id"])
    assert orphan_runs and {r["state"] for r in orphan_runs} <= {"queued", "skipped"}, orphan_runs
    assert "queued" in {r["state"] for r in orphan_runs}
    assert procs.events("exec-hello", "token.unserved") or procs.events("exec-other", "token.unserved")
    assert not procs.events("exec-hello", "run.failed") and not procs.events("exec-other", "run.failed")


def test_the_cli_stores_the_job_and_prints_the_warning_on_stderr(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    warning = (
        "cronos: warning: no live executor of queue 'default' serves action 'nobody': its runs wait queued"
        " until one imports a module that registers it"
    )
    with api_process(tmp_path, database_url, key_prefix) as url:  # no executor at all
        create = (
            "jobs",
            "create",
            "--name",
            "orphan",
            "--cron-expression",
            "0 0 1 1 *",
            "--payload",
            '{"action": "nobody"}',
        )
        done = cli(tmp_path, url, *create)
        assert "orphan" in ok(done) and "warnings" not in done.stdout
        assert done.stderr.strip() == warning
        updated = cli(tmp_path, url, "jobs", "update", "orphan", "--timeout-s", "30", "--json")
        assert [w["message"] for w in as_json(updated)["warnings"]] == [warning.removeprefix("cronos: warning: ")]
        assert updated.stderr.strip() == warning
