"""Routing by capability in a mixed pool, with a real leader, API and executors on real PostgreSQL and
Redis: a shell run goes only to an executor with CRONOS_ALLOW_SHELL=1 (presence.can_run). With only
executors without it, the run waits queued with its reason in the API and counted; once an executor
that allows shell joins, it runs there, and no run fails on the other."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from cronos import metrics
from cronos.settings import Settings
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.test_api_revisions import _roles
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

SHELL = {"kind": "shell", "payload": {"argv": ["echo", "routed"]}, "misfire_grace_s": 300}
WAITS = "no live executor of queue 'default' runs shell jobs: its runs wait queued"
NOT_ENDED = ("queued", "waiting", "reserved", "running")  # a run reserved ahead has not run yet


def _unserved() -> float:
    return float(metrics.TOKENS_UNSERVED.labels(queue="default")._value.get())


def _node(settings: Settings, name: str, *, shell: bool) -> Settings:
    return msgspec.structs.replace(settings, node_id=f"{settings.node_id}-{name}", allow_shell=shell)


@pytest.fixture
def base(settings: Settings) -> Settings:
    # The watchdog re-pushes an unclaimed run 0.5 s past due, then 1, 2, 4 ... s: a joining
    # executor gets the waiting run within seconds.
    return msgspec.structs.replace(settings, allow_shell=True, overdue_after_ms=500)


@asynccontextmanager
async def _pool(settings: Settings) -> AsyncIterator[Api]:
    """The API (shell jobs allowed, so an admin may create them), the leader, and an executor
    without CRONOS_ALLOW_SHELL."""
    no_shell = _node(settings, "noshell", shell=False)
    async with running_api(settings) as api, _roles(Dispatcher(settings), Executor(no_shell)):
        yield api


async def _runs(api: Api, job: int) -> list[dict[str, Any]]:
    reply = await api.call("GET", f"/api/jobs/{job}/runs?limit=500")
    assert reply.status == 200, reply.body
    return list(reply.body["items"])


def _reported(api: Api) -> Callable[[], Any]:
    async def seen() -> list[dict[str, Any]] | None:
        body = (await api.call("GET", "/api/cluster")).body
        return [u for u in body["unserved"] if u["shell"]] or None

    return seen


async def test_a_shell_run_waits_for_an_executor_that_allows_shell_and_never_fails_on_another(
    base: Settings,
) -> None:
    counted = _unserved()
    async with _pool(base) as api:
        created = await api.create(name="routed", cron_expression="@never", **SHELL)
        job = int(created["id"])
        # The answer says at once that no live executor runs it.
        assert [w["code"] for w in created["warnings"]] == ["unserved_action"]
        assert created["warnings"][0]["message"].startswith(WAITS)
        assert (await api.call("POST", f"/api/jobs/{job}/trigger")).status in (200, 201, 202)

        async def declined() -> bool:
            return _unserved() > counted

        await wait_for(declined, timeout=20, what="the executor without shell to decline the run's token")
        [run] = await _runs(api, job)
        assert run["state"] == "queued" and run["error"] is None  # waiting, not failed
        detail = (await api.call("GET", f"/api/runs/{run['id']}")).body
        assert detail["unserved"] == WAITS
        [unserved] = await wait_for(_reported(api), timeout=20, what="/api/cluster to list shell jobs unserved")
        assert (unserved["queue"], unserved["action"], unserved["message"]) == ("default", None, WAITS)
        nodes = {n["node_id"]: n for n in (await api.call("GET", "/api/cluster")).body["nodes"]}
        assert nodes[f"{base.node_id}-noshell"]["shell"] is False

        shell_node = _node(base, "shell", shell=True)
        async with _roles(Executor(shell_node)):

            async def ran() -> dict[str, Any] | None:
                [done] = await _runs(api, job)
                return done if done["state"] not in NOT_ENDED else None

            done = await wait_for(ran, timeout=40, what="the waiting run to run on the executor that joined")
            assert (done["state"], done["node_id"]) == ("completed", shell_node.node_id)
            assert "unserved" not in (await api.call("GET", f"/api/runs/{done['id']}")).body  # only a queued run's

            # Both executors read the queue now: an every-second shell job's runs (tokens written
            # by the leader's ticks) all complete on the one that allows shell, none fails.
            every = int((await api.create(name="every-second", cron_expression="* * * * * *", **SHELL))["id"])

            async def four() -> list[dict[str, Any]] | None:
                ended = [r for r in await _runs(api, every) if r["state"] not in NOT_ENDED]
                return ended if len(ended) >= 4 else None

            ended = await wait_for(four, timeout=40, what="four runs of the every-second shell job")
            await api.call("POST", f"/api/jobs/{every}/pause")
            assert {(r["state"], r["node_id"]) for r in ended} == {("completed", shell_node.node_id)}
