"""Cronos on a real Redis Cluster (`REDIS_URL=redis+cluster://…`): three masters started from
`redis-server --cluster-enabled yes` on free loopback ports and joined with `redis-cli --cluster
create`. The stream, the scripts and the locks work on it, a leader and an executor run a job's
ticks through it, and the run stream's master killed with SIGKILL and restarted empty costs no
tick: the leader sees the data loss and pushes the queued runs again."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import msgspec
import pytest

from api.backends import Backends
from cronos import presence, redis_client
from cronos.identity import ClusterMismatch
from cronos.keys import Keys
from cronos.locks import OwnedLock, TickLocks
from cronos.messages import RunToken
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store.identity import check
from cronos.stream import RunStream
from cronos.stream_members import StreamMembers
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.cluster.servers import free_port
from tests.waiting import block_until, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="needs redis-server and redis-cli (a Redis Cluster is started from them)",
)


@dataclass
class RedisClusterServers:
    """Three masters, no replicas, on loopback; each node's files in its own directory."""

    root: Path
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}/0"

    def start_node(self, port: int) -> None:
        home = self.root / str(port)
        home.mkdir(exist_ok=True)
        self.procs[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--save", "",
             "--appendonly", "no", "--logfile", "redis.log"],
            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        block_until(lambda: self.cli(port, "ping") == "PONG", timeout=10, what=f"redis-server on {port}")

    def cli(self, port: int, *args: str) -> str:
        done = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=10)
        return done.stdout.strip()

    def healthy(self) -> bool:
        return all("cluster_state:ok" in self.cli(port, "cluster", "info") for port in self.ports)

    def kill(self, port: int) -> None:
        self.procs[port].send_signal(signal.SIGKILL)
        self.procs[port].wait(10)

    def owner(self, key: str) -> int:
        """The port of the master serving `key`'s slot."""
        slot = int(self.cli(self.ports[0], "cluster", "keyslot", key))
        for line in self.cli(self.ports[0], "cluster", "nodes").splitlines():
            fields = line.split()
            if "master" not in fields[2]:
                continue
            for part in fields[8:]:
                lo, _, hi = part.partition("-")
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                    return int(fields[1].split(":")[1].split("@")[0])
        raise AssertionError(f"no master serves slot {slot}")


def cluster_port() -> int:
    """A free port whose cluster bus port (the port + 10000) is free and valid too."""
    while True:
        port = free_port()
        if port + 10_000 > 65_535:
            continue
        with contextlib.suppress(OSError), socket.socket() as sock:
            sock.bind(("127.0.0.1", port + 10_000))
            return port


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisClusterServers]:
    servers = RedisClusterServers(Path(tempfile.mkdtemp(prefix="cronos-rc-")))
    try:
        servers.ports = [cluster_port() for _ in range(3)]
        for port in servers.ports:
            servers.start_node(port)
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in servers.ports), "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr
        block_until(servers.healthy, timeout=30, what="cluster_state:ok on every node")
        yield servers
    finally:
        for proc in servers.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)
        shutil.rmtree(servers.root, ignore_errors=True)


@pytest.fixture
def cluster_settings(settings: Settings, redis_cluster: RedisClusterServers) -> Settings:
    return msgspec.structs.replace(settings, redis_url=redis_cluster.url)


@pytest.fixture
async def client(cluster_settings: Settings) -> AsyncIterator[redis_client.Redis]:
    made = redis_client.connect(cluster_settings.redis_url)
    yield made
    await made.aclose()


def test_the_keys_of_one_command_share_a_slot_and_spread_over_the_masters(redis_cluster: RedisClusterServers) -> None:
    keys = Keys("t:")
    assert redis_cluster.owner(keys.stream) == redis_cluster.owner(keys.redis_marker)
    # The identity is lost with the marker (one shard), so the leader that sees the loss writes it again.
    assert redis_cluster.owner(keys.cluster) == redis_cluster.owner(keys.redis_marker)
    locks = {redis_cluster.owner(keys.tick_lock(j, 1000 * j, 1)) for j in range(1, 50)}
    assert len(locks) == 1  # a batch of tick locks is one script call


async def test_stream_scripts_locks_and_presence_work_on_a_cluster(
    client: redis_client.Redis, cluster_settings: Settings
) -> None:
    keys = Keys(cluster_settings.key_prefix)
    scripts = Scripts(client)
    stream = RunStream(client, keys, scripts)
    await stream.ensure_group()
    tokens = [RunToken(run_id=i, job_id=i, scheduled_for_ms=1000 * i) for i in range(1, 6)]
    assert await stream.publish(tokens) == 5
    got = await stream.read("c1", 10, None)
    assert [d.token.run_id for d in got] == [1, 2, 3, 4, 5]
    # Settling releases tick locks (one script, slot {ticks}) and acks (slot {runs}) in one pipeline.
    ticks = TickLocks(scripts, "c1")
    lock_keys = [keys.tick_lock(t.job_id, t.scheduled_for_ms, t.attempt) for t in tokens]
    assert await ticks.acquire(lock_keys, 10_000) == [True] * 5
    await stream.settle([d.ref for d in got], ticks, lock_keys)
    assert (await stream.info()).pending == 0
    assert await client.exists(*lock_keys) == 0
    # /api/cluster's pipelined reads, and the leader's drop of an idle queue (one script, slot {runs}).
    assert await stream.infos(["default", "absent"]) == {
        "default": await stream.info(),
        "absent": await stream.info("absent"),
    }
    await stream.ensure_group("idle")
    await stream.list_queue("idle")
    assert await stream.known_queues() == ["default", "idle"]
    assert await stream.drop_if_empty("idle") and not await stream.drop_if_empty("default")
    assert await stream.known_queues() == ["default"] and not await client.exists(keys.queue_stream("idle"))

    leader = OwnedLock(client, scripts, keys.leader, "n1", 5000)
    other = OwnedLock(client, scripts, keys.leader, "n2", 5000)
    assert await leader.acquire() and not await other.acquire()
    assert await leader.renew()
    await leader.release()
    assert await other.acquire()

    await presence.beat(client, keys, "executor", "n1", 10)
    assert [n["node_id"] for n in await presence.nodes(client, keys)] == ["n1"]


async def test_an_executor_reads_the_streams_of_its_queues_in_one_command_on_a_cluster(
    client: redis_client.Redis, cluster_settings: Settings, redis_cluster: RedisClusterServers
) -> None:
    keys = Keys(cluster_settings.key_prefix)
    assert redis_cluster.owner(keys.queue_stream("gpu")) == redis_cluster.owner(keys.stream)
    stream = RunStream(client, keys, queues=("default", "gpu"))
    await stream.ensure_group()
    await stream.publish([RunToken(run_id=1, job_id=1, scheduled_for_ms=1000)])
    await stream.publish([RunToken(run_id=2, job_id=2, scheduled_for_ms=1000)], "gpu")
    await stream.list_queue("gpu")
    got = await stream.read("c1", 10, 100)
    assert sorted((d.queue, d.token.run_id) for d in got if d.token) == [("default", 1), ("gpu", 2)]
    assert await stream.known_queues() == ["default", "gpu"]
    await stream.touch("c1", [d.ref for d in got])
    await stream.settle([d.ref for d in got], TickLocks(Scripts(client), "c1"), [])
    assert (await stream.info("gpu")).pending == (await stream.info()).pending == 0


@contextlib.asynccontextmanager
async def roles(settings: Settings) -> AsyncIterator[tuple[Dispatcher, Executor]]:
    async with Dispatcher(settings) as dispatcher, Executor(settings) as executor:
        tasks = [asyncio.create_task(dispatcher.run()), asyncio.create_task(executor.run())]
        try:
            yield dispatcher, executor
        finally:
            dispatcher.stop()
            executor.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def _add_job(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression, payload, last_scheduled_for) VALUES"
            " ('every second', '* * * * * *', '{\"action\": \"noop\"}', now()) RETURNING id"
        )
        await conn.execute("SELECT pg_notify('cronos_jobs', $1)", f'{{"op": "created", "job_id": {job_id}}}')
    return int(job_id)


async def _completed(pool: asyncpg.Pool, job_id: int) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'completed'", job_id))


# redis-py's cluster client leaves the sockets of a node that died to the garbage collector
# (ResourceWarning when collected): reclaimed at the end of this test, not in the next one.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_leader_and_an_executor_run_ticks_through_a_cluster_and_survive_its_stream_master_restarting(
    pg_pool: asyncpg.Pool, cluster_settings: Settings, redis_cluster: RedisClusterServers
) -> None:
    job = await _add_job(pg_pool)
    async with roles(cluster_settings):

        async def ticking(at_least: int) -> bool:
            return await _completed(pg_pool, job) >= at_least

        await wait_for(lambda: ticking(3), timeout=30, what="3 ticks completed through the cluster")

        # kill -9 the master of the run stream's slot; restarted, it rejoins with its slots, empty.
        port = redis_cluster.owner(Keys(cluster_settings.key_prefix).stream)
        redis_cluster.kill(port)
        await asyncio.sleep(1.0)  # an outage of a second: ticks fall due meanwhile
        await asyncio.to_thread(redis_cluster.start_node, port)
        await asyncio.to_thread(block_until, redis_cluster.healthy, timeout=30, what="cluster healthy again")
        back = await _completed(pg_pool, job)
        await wait_for(lambda: ticking(back + 3), timeout=30, what="ticks completing after the restart")
        # The shard lost the cluster identity with the marker: the leader wrote it again.
        ours = await pg_pool.fetchval("SELECT id::text FROM cluster_identity")
        client = redis_client.connect(cluster_settings.redis_url)
        try:
            assert await client.get(Keys(cluster_settings.key_prefix).cluster) == ours.encode()
        finally:
            await client.aclose()

        # Every tick due by now ends (none stays queued for want of its token), none twice.
        cutoff = await pg_pool.fetchval("SELECT now()")

        async def settled() -> bool:
            left = await pg_pool.fetchval(
                "SELECT count(*) FROM runs WHERE job_id = $1 AND scheduled_for <= $2"
                " AND state IN ('queued', 'waiting', 'running')",
                job,
                cutoff,
            )
            return int(left) == 0

        await wait_for(settled, timeout=30, what="every tick due before the check ended")
    # The executor stopped cleanly: its consumer went with it (one script on the stream's shard).
    client = redis_client.connect(cluster_settings.redis_url)
    try:
        assert await StreamMembers(client, Keys(cluster_settings.key_prefix)).of(["default"]) == []
    finally:
        await client.aclose()
    gc.collect()
    assert (
        await pg_pool.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM runs WHERE job_id = $1 GROUP BY scheduled_for, attempt"
            " HAVING count(*) > 1) d",
            job,
        )
        == 0
    )


async def test_the_api_reaches_a_cluster_with_its_own_client_options(cluster_settings: Settings) -> None:
    backends = Backends(cluster_settings)  # no retries, short timeouts: the health check's client
    try:
        assert await backends.redis_call(backends.redis.ping())
        assert await backends.redis_call(backends.redis.get(Keys(cluster_settings.key_prefix).leader)) is None
    finally:
        await backends.close()


async def test_the_cluster_identity_is_claimed_and_checked_on_a_cluster(
    pg_pool: asyncpg.Pool, cluster_settings: Settings, client: redis_client.Redis
) -> None:
    ours = await check(cluster_settings)  # claims the prefix
    assert (await client.get(Keys(cluster_settings.key_prefix).cluster)).decode() == ours
    assert await check(cluster_settings) == ours  # the same cluster: no refusal
    await pg_pool.execute("UPDATE cluster_identity SET id = gen_random_uuid()")  # now another cluster's database
    with pytest.raises(ClusterMismatch, match=f"belongs to cluster {ours} but database "):
        await check(cluster_settings)


async def test_a_token_is_handed_over_on_a_cluster(client: redis_client.Redis, cluster_settings: Settings) -> None:
    """executor.routing's hand-over (re-add, then ack: a plain pipeline on a cluster) and the
    presence it reads (actions as JSON) work on a Redis Cluster."""
    keys = Keys(cluster_settings.key_prefix)
    stream = RunStream(client, keys)
    await stream.ensure_group()
    await stream.publish([RunToken(run_id=1, job_id=1, scheduled_for_ms=1000, action="hello")])
    (got,) = await stream.read("lacks", 10, None)
    assert got.token is not None
    await stream.hand_over(got.ref, got.token)
    (again,) = await stream.read("has", 10, None)
    assert again.entry_id != got.entry_id and again.token == got.token
    info = await stream.info()
    assert info.length == 2 and info.pending == 1 and info.consumers == {"lacks": 0, "has": 1}
    await presence.beat(client, keys, "executor", "has", 10, queues="default", actions=["hello"])
    assert presence.servers(await presence.nodes(client, keys), presence.Needs("default", "hello")) == ["has"]
