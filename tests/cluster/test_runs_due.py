"""The runs due ahead, from real processes: two `cronos dispatcher`s, jobs on two queues (one paused,
one whose calendar excludes every day), the leader's /metrics scraped and its `cronos_runs_due` and
`cronos_runs_due_peak` checked against a count of the jobs' fire times by cronos.schedule; the
standby exports none; paused past its ttl, the leader loses the lock to the standby, which exports
the same numbers, and once it runs again (leading no more) it exports none."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cronos.schedule import parse_schedule
from cronos.settings import Settings
from tests.cluster.servers import free_port
from tests.cluster.test_executor_process import Procs, procs  # noqa: F401  (the fixture)
from tests.integration.api_client import running_api
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

# queue -> the expressions of its active jobs (what the leader counts)
COUNTED = {"fast": ["*/5 * * * * *"] * 3, "slow": ["* * * * *"] * 2}
WEEK = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

Series = dict[tuple[str, str, str], float]  # (metric, queue, within_s) -> value


async def _scrape(port: int) -> tuple[float, Series]:
    """cronos_leader and the runs-due series of one process's /metrics."""
    timeout = aiohttp.ClientTimeout(total=2)  # a paused process does not answer
    async with (
        aiohttp.ClientSession(timeout=timeout) as client,
        client.get(f"http://127.0.0.1:{port}/metrics") as reply,
    ):
        text = await reply.text()
    leader, series = 0.0, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "cronos_leader":
                leader = sample.value
            elif sample.name in ("cronos_runs_due", "cronos_runs_due_peak"):
                series[(sample.name, sample.labels["queue"], sample.labels["within_s"])] = sample.value
    return leader, series


def _fire_times(expression: str, after: datetime, horizon_s: int) -> list[datetime]:
    schedule, until, found = parse_schedule(expression, "UTC"), after + timedelta(seconds=horizon_s), []
    while (after := schedule.next_after(after)) <= until:
        found.append(after)
    return found


def _expected(now: datetime, horizon_s: int) -> dict[str, int]:
    """Each queue's runs due in (now, now + horizon], counted by cronos.schedule."""
    return {q: sum(len(_fire_times(e, now, horizon_s)) for e in exprs) for q, exprs in COUNTED.items()}


def _matches(series: Series, now: datetime) -> bool:
    """The gauges agree with the independent count for every horizon whose count does not depend on
    the instant within a few seconds (an every-5-s job within 30, 60, 300 s; a minute job within
    60 and 300 s), and the peak is each queue's jobs at once."""
    for horizon in (30, 60, 300):
        for queue, count in _expected(now, horizon).items():
            if queue == "slow" and horizon == 30:
                continue  # 0 or 2, by the instant
            if series.get(("cronos_runs_due", queue, str(horizon))) != count:
                return False
    peaks = {q: series.get(("cronos_runs_due_peak", q, "300")) for q in COUNTED}
    return peaks == {"fast": 3, "slow": 2}


async def test_the_leader_exports_the_runs_due_per_queue_and_a_standby_none(
    settings: Settings,
    procs: Procs,  # noqa: F811  (the imported fixture)
) -> None:
    ports = {"d1": free_port(), "d2": free_port()}
    env = {"CRONOS_LEADER_TTL_MS": "1500"}
    procs.start("d1", "dispatcher", CRONOS_METRICS_PORT=str(ports["d1"]), **env)
    async with running_api(settings) as api:
        assert (await api.call("PUT", "/api/calendars/never", json={"weekdays": WEEK})).status in (200, 201)
        for queue, expressions in COUNTED.items():
            for n, expression in enumerate(expressions):
                await api.create(name=f"{queue}-{n}", cron_expression=expression, queue=queue)
        paused = await api.create(name="paused", cron_expression="* * * * * *", queue="slow")
        assert (await api.call("POST", f"/api/jobs/{paused['id']}/pause")).status == 200
        await api.create(name="day-off", cron_expression="* * * * * *", queue="slow", calendars=[{"name": "never"}])

    async def leader_counts(name: str) -> bool:
        try:
            leader, series = await _scrape(ports[name])
        except (aiohttp.ClientError, TimeoutError):  # not listening yet, or paused
            return False
        return leader == 1 and _matches(series, datetime.now(UTC))

    await wait_for(lambda: leader_counts("d1"), timeout=60, interval=0.5, what="d1's runs-due gauges")
    _leader, series = await _scrape(ports["d1"])
    assert {queue for _m, queue, _h in series} == {"fast", "slow", "default"}  # every queue an active job names
    assert {h for _m, _q, h in series} == {"30", "60", "300"}
    assert series[("cronos_runs_due", "default", "300")] == 0

    procs.start("d2", "dispatcher", CRONOS_METRICS_PORT=str(ports["d2"]), **env)

    async def standby_up() -> bool:
        try:
            return (await _scrape(ports["d2"]))[0] == 0
        except aiohttp.ClientError:
            return False

    await wait_for(standby_up, timeout=30, interval=0.5, what="d2's /metrics, not leading")
    assert (await _scrape(ports["d2"]))[1] == {}, "a standby exports no runs due"

    procs.signal("d1", signal.SIGSTOP)  # past its ttl: d2 takes the lock
    await wait_for(lambda: leader_counts("d2"), timeout=60, interval=0.5, what="d2's runs-due gauges after failover")
    procs.signal("d1", signal.SIGCONT)

    async def former_leader_clean() -> bool:
        try:
            leader, series = await _scrape(ports["d1"])
        except (aiohttp.ClientError, TimeoutError):
            return False
        return leader == 0 and series == {}

    await wait_for(former_leader_clean, timeout=30, interval=0.5, what="d1, no longer leading, exports no runs due")
    assert (await _scrape(ports["d2"]))[0] == 1
