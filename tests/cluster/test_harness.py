"""The chaos harness's own servers and process control work (no Cronos role needed)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest
import redis

from cronos.store.db import CONNECTION_ERRORS
from tests.cluster.harness import Cluster
from tests.cluster.ledger import insert_job, load, with_db
from tests.cluster.node import Node
from tests.waiting import block_until

pytestmark = pytest.mark.cluster


def _state(pid: int, want: str) -> str:
    """The process state letter once it is one of `want` (signals land asynchronously)."""

    def state() -> str:
        letter = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
        return letter if letter in want else ""

    return block_until(state, timeout=5, what=f"process {pid} in state {want}")


async def test_postgres_keeps_committed_data_across_clean_restart_and_crash(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(dispatchers=0, executors=0)
    assert cluster.pg is not None and cluster.pg.is_up()

    async def count(conn: asyncpg.Connection) -> int:
        return int(await conn.fetchval("SELECT count(*) FROM jobs"))

    assert await with_db(cluster.dsn, count) == 0  # migrated schema, from the template
    conn = await asyncpg.connect(cluster.dsn)
    await conn.execute("INSERT INTO jobs (name, cron_expression) VALUES ('a', '* * * * * *')")
    cluster.pg_restart()
    with pytest.raises(CONNECTION_ERRORS):
        await conn.fetchval("SELECT 1")  # the restart closed every connection
    conn.terminate()
    assert await with_db(cluster.dsn, count) == 1

    await with_db(
        cluster.dsn, lambda c: c.execute("INSERT INTO jobs (name, cron_expression) VALUES ('b', '* * * * *')")
    )
    cluster.pg.crash()
    assert not cluster.pg.is_up()
    cluster.pg.start()  # crash recovery replays the WAL
    assert await with_db(cluster.dsn, count) == 2


def test_redis_restart_loses_every_key_on_the_same_port(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(dispatchers=0, executors=0)
    assert cluster.redis_server is not None
    port = cluster.redis_server.port
    client = redis.Redis(port=port)
    client.set("k", "v")
    cluster.redis_restart()
    assert cluster.redis_server.port == port
    assert redis.Redis(port=port).get("k") is None
    assert cluster.leader() is None


def test_node_control_kill_pause_resume_terminate_and_logs(tmp_path: Path) -> None:
    script = "import signal,sys,time; print('up', flush=True); "
    script += "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3)); time.sleep(60)"
    node = Node("executor", "x1", [sys.executable, "-c", script], {}, tmp_path, tmp_path / "x1.log")
    node.start()
    try:
        block_until(lambda: "up" in node.logfile.read_text(), what="the node to print 'up'")
        assert node.proc is not None
        node.pause()
        _state(node.proc.pid, "T")
        node.resume()
        _state(node.proc.pid, "SR")
        assert node.terminate() == 3
        node.start()  # a restart appends to the same log
        node.pause()
        node.kill()  # kill -9 works on a stopped process too
        assert node.proc.returncode == -9
        assert node.logfile.read_text().count("--- start x1") == 2
    finally:
        node.kill()


def test_close_stops_servers_and_removes_the_directory() -> None:
    cluster = Cluster(dispatchers=0, executors=0)
    cluster.start()
    root, pg, rd = cluster.root, cluster.pg, cluster.redis_server
    cluster.close()
    assert pg is not None and rd is not None
    assert not pg.is_up() and not rd.is_up()
    assert not root.exists()


async def test_the_audit_trigger_stamps_each_state_change_of_a_run(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(dispatchers=0, executors=0)
    job = await insert_job(cluster.dsn, "audited", "* * * * * *")

    async def walk(conn: asyncpg.Connection) -> None:
        run_id = await conn.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at)"
            " VALUES ($1, now(), 'schedule', 'queued', now()) RETURNING id",
            job.id,
        )
        await conn.execute("UPDATE runs SET state = 'running', started_at = now() WHERE id = $1", run_id)
        await conn.execute("UPDATE runs SET node_id = 'x' WHERE id = $1", run_id)  # not a state change
        await conn.execute("UPDATE runs SET state = 'completed', finished_at = now() WHERE id = $1", run_id)

    await with_db(cluster.dsn, walk)
    ledger = await load(cluster.dsn)
    (run,) = ledger.runs
    began, ended = ledger.running[run.id]
    assert ended is not None and run.started_at is not None and began >= run.started_at and ended > began
