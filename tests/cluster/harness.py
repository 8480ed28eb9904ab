"""A cluster of real Cronos OS processes on private PostgreSQL and Redis servers.

    cluster = Cluster(dispatchers=3, executors=3)
    cluster.start()
    try:
        await insert_job(cluster.dsn, ...)   # ledger.py
        cluster.kill(cluster.leader())       # faults: kill, pause/resume, terminate, restart,
        ...                                  # redis_restart, pg_restart, pg_crash
    finally:
        cluster.close()                      # every child, always (atexit too)

Nodes (node.py) write to logs/<node>.log; every fault is appended to `timeline` with its
wall-clock time.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import redis

from cronos.keys import Keys
from tests.cluster.node import Node
from tests.cluster.proxy import Proxy
from tests.cluster.receiver import Receiver
from tests.cluster.servers import REPO, PgServer, RedisServer, cronos_command, free_port, pg_from_template

_live: set[Cluster] = set()
_ENV_DROP = ("DATABASE_URL", "REDIS_URL", "PORT")


@dataclass(slots=True)
class Cluster:
    dispatchers: int = 3
    executors: int = 3
    api: bool = False
    ttl_ms: int = 1000
    lease_s: float = 1.5
    drain_s: float = 2.0
    prefix: str = "chaos:"
    extra_env: dict[str, str] = field(default_factory=dict)
    executor_imports: tuple[str, ...] = ("tests.cluster.tasks",)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cronos-cluster-")))
    keep: bool = False  # keep root (logs, data) after close
    nodes: dict[str, Node] = field(default_factory=dict)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)  # nodes that exited on their own, revived
    pg: PgServer | None = None
    redis_server: RedisServer | None = None
    receiver: Receiver = field(default_factory=Receiver)
    api_port: int = 0
    # (node, "postgresql" | "redis"): that node's link to that backend goes through its own Proxy
    proxied: tuple[tuple[str, str], ...] = ()
    proxies: dict[tuple[str, str], Proxy] = field(default_factory=dict)

    def __hash__(self) -> int:
        return id(self)

    # --- lifecycle ---

    def start(self) -> None:
        _live.add(self)
        self.root.chmod(0o755)  # postgres must traverse it
        (self.root / "logs").mkdir(exist_ok=True)
        self.pg = pg_from_template(self.root / "pg")
        self.pg.start()
        self.redis_server = RedisServer(self.root / "redis")
        self.redis_server.start()
        self.receiver.start()
        for node, backend in self.proxied:
            port = {"postgresql": self.pg.port, "redis": self.redis_server.port}[backend]
            self.proxies[(node, backend)] = Proxy(port, name=f"{node}-{backend}").start()
        for i in range(1, self.dispatchers + 1):
            self._add("dispatcher", f"d{i}", ["dispatcher"])
        imports = [arg for module in self.executor_imports for arg in ("--import", module)]
        for i in range(1, self.executors + 1):
            self._add("executor", f"e{i}", ["executor", *imports])
        if self.api:
            self.api_port = free_port()
            self._add("api", "api", ["api"])
        for node in self.nodes.values():
            node.start()
        self.mark("cluster started")

    def close(self) -> None:
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.kill()
        self.receiver.stop()
        for proxy in self.proxies.values():
            proxy.stop()
        if self.redis_server is not None:
            self.redis_server.stop()
        if self.pg is not None:
            self.pg.stop()
        _live.discard(self)
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def _add(self, role: str, name: str, args: list[str]) -> None:
        assert self.pg is not None and self.redis_server is not None
        env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP and not k.startswith("CRONOS_")}
        env |= {
            "DATABASE_URL": self.pg.dsn,
            "REDIS_URL": self.redis_server.url,
            "CRONOS_KEY_PREFIX": self.prefix,
            "CRONOS_NODE_ID": name,
            "CRONOS_LEADER_TTL_MS": str(self.ttl_ms),
            "CRONOS_LEADER_DB_TIMEOUT_MS": str(self.ttl_ms),  # the 2 s default is past the short test ttl
            "CRONOS_RUN_LEASE_S": str(self.lease_s),
            "CRONOS_DRAIN_TIMEOUT_S": str(self.drain_s),
            "CRONOS_RESYNC_INTERVAL_S": "2",
            "CRONOS_LOG_FORMAT": "json",
            "CRONOS_ALLOW_SHELL": "1",
            "CRONOS_HTTP_ALLOW_NETS": "127.0.0.0/8",  # the receivers listen on loopback (SSRF guard)
            "PYTHONPATH": str(REPO),  # for --import tests.cluster.tasks; cwd is the cluster root (no .env)
            "PYTHONUNBUFFERED": "1",
        }
        if role == "api":
            env["PORT"] = str(self.api_port)
        if (proxy := self.proxies.get((name, "postgresql"))) is not None:
            env["DATABASE_URL"] = self.pg.dsn.replace(f":{self.pg.port}/", f":{proxy.port}/")
        if (proxy := self.proxies.get((name, "redis"))) is not None:
            env["REDIS_URL"] = self.redis_server.url.replace(f":{self.redis_server.port}", f":{proxy.port}")
        env |= self.extra_env
        argv = [*cronos_command(), *args]
        self.nodes[name] = Node(role, name, argv, env, self.root, self.root / "logs" / f"{name}.log")

    # --- what is where ---

    @property
    def dsn(self) -> str:
        assert self.pg is not None
        return self.pg.dsn

    @property
    def keys(self) -> Keys:
        return Keys(self.prefix)

    def role(self, role: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == role]

    def leader(self) -> Node | None:
        """The node named by the Redis leader key (None while nobody holds it or Redis is down)."""
        assert self.redis_server is not None
        try:
            client = redis.Redis(port=self.redis_server.port, socket_timeout=1)
            try:
                holder = client.get(self.keys.leader)
            finally:
                client.close()
        except redis.RedisError:
            return None
        if not holder:
            return None
        return self.nodes.get(holder.decode() if isinstance(holder, bytes) else str(holder))

    def health(self, port: int | None = None) -> int:
        """GET /health of the API (at `port`, default the cluster's): its status code (0 when it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.api_port}/health", timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def log_text(self, name: str) -> str:
        return self.nodes[name].logfile.read_text(errors="replace")

    def _dead_on_their_own(self) -> list[tuple[Node, str]]:
        found = []
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None and not node.stopped:
                tail = "\n".join(self.log_text(node.name).splitlines()[-12:])
                found.append((node, f"{node.name} exited with {node.proc.returncode}:\n{tail}"))
        return found

    def unexpected_exits(self) -> list[str]:
        """Nodes that exited on their own (not killed or stopped by the harness), with their log tails."""
        return self.crashes + [text for _, text in self._dead_on_their_own()]

    def revive(self) -> list[str]:
        """Restart nodes that exited on their own, as a supervisor would; each stays a finding."""
        revived = []
        for node, text in self._dead_on_their_own():
            self.crashes.append(text)
            code = node.proc.returncode if node.proc is not None else None
            node.start()
            self.mark(f"{node.name} had exited on its own (exit {code}); restarted")
            revived.append(node.name)
        return revived

    def assert_alive(self) -> None:
        exits = self.unexpected_exits()
        assert not exits, "\n".join(exits)

    # --- faults (each recorded on the timeline) ---

    def mark(self, what: str) -> float:
        now = time.time()
        self.timeline.append((now, what))
        return now

    def proxy(self, node: Node | str, backend: str) -> Proxy:
        """The proxy on `node`'s link to `backend` (the cluster was made with it in `proxied`)."""
        return self.proxies[(node if isinstance(node, str) else node.name, backend)]

    def kill(self, node: Node) -> float:
        node.kill()
        return self.mark(f"kill -9 {node.name}")

    def pause(self, node: Node) -> float:
        node.pause()
        return self.mark(f"SIGSTOP {node.name}")

    def resume(self, node: Node) -> float:
        node.resume()
        return self.mark(f"SIGCONT {node.name}")

    def terminate(self, node: Node) -> float:
        code = node.terminate()
        return self.mark(f"SIGTERM {node.name} (exit {code})")

    def restart(self, node: Node) -> float:
        if node.alive:
            node.kill()
        node.start()
        return self.mark(f"start {node.name}")

    def redis_restart(self, down_s: float = 0.0) -> float:
        """Kill redis-server, `down_s` of downtime, start it empty; returns when it went down."""
        assert self.redis_server is not None
        at = self.mark("redis-server killed")
        self.redis_server.restart(down_s)
        self.mark("redis-server started empty")
        return at

    def pg_restart(self) -> float:
        assert self.pg is not None
        self.pg.restart()
        return self.mark("postgresql clean restart")

    def pg_crash(self, down_s: float = 0.0) -> float:
        """Immediate stop (a crash), `down_s` of downtime, then start with crash recovery."""
        assert self.pg is not None
        at = self.mark("postgresql immediate stop")
        self.pg.crash()
        time.sleep(down_s)
        self.pg.start()
        self.mark("postgresql started after crash")
        return at


def _close_all() -> None:
    for cluster in list(_live):
        cluster.close()


atexit.register(_close_all)
