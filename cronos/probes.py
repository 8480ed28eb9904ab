"""The dispatcher's and executor's probe port (CRONOS_METRICS_PORT): /metrics, /livez and /readyz.

prometheus-client serves /metrics from a thread of its own, so it answered while the role's event
loop was stuck (an async task calling time.sleep, a pass that never yields), and a liveness probe on
it kept a dead role alive. The port is still served by a thread (a scrape costs the loop nothing),
but two routes ask the loop itself:

- GET /livez: 200 once the event loop has run a callback posted to it, 503 when it has not within
  LOOP_DEADLINE_S. A stuck loop fails it; a backend outage does not (no restart for that).
- GET /readyz: 200 when PostgreSQL and Redis each answered a ping just now, run on the loop with
  connections of its own and bounded by BACKEND_TIMEOUT_S; 503 naming the one that did not.
- anything else: prometheus-client's exposition (/metrics).
"""

from __future__ import annotations

import asyncio
import logging
import socketserver
import threading
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIEnvironment

import asyncpg
from prometheus_client import make_wsgi_app
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from cronos import redis_client
from cronos.errors import BackendUnavailable, ConfigError
from cronos.metrics import REGISTRY
from cronos.settings import Settings
from cronos.store.db import connect_one, ping

log = logging.getLogger("cronos.probes")

# A loop that runs no callback for this long is stuck: the kubelet's probe (timeoutSeconds 3) and
# the image's HEALTHCHECK (2 s) get the 503 before they give up on their own.
LOOP_DEADLINE_S = 1.5
BACKEND_TIMEOUT_S = 2.0  # each backend's connect and ping, for /readyz
_DOWN = (BackendUnavailable, TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError, RedisError)


class BackendPings:
    """One PostgreSQL connection and one Redis client of the probe's own, opened on first use and
    again after a failure; one check at a time (a connection runs one query at a time)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pg: asyncpg.Connection | None = None
        self._redis: Any = None
        self._lock = asyncio.Lock()

    async def failures(self) -> list[str]:
        """The backends that did not answer (empty: both did)."""
        async with self._lock:
            down = await asyncio.gather(self._postgres(), self._redis_ping())
        return [backend for backend in down if backend]

    async def _postgres(self) -> str:
        try:
            async with asyncio.timeout(BACKEND_TIMEOUT_S):
                if self._pg is None or self._pg.is_closed():
                    self._pg = await connect_one(self._settings.database_url, timeout=BACKEND_TIMEOUT_S)
                await ping(self._pg)
        except _DOWN:
            if self._pg is not None:
                self._pg.terminate()  # a fresh connection next time
                self._pg = None
            return "postgresql"
        return ""

    async def _redis_ping(self) -> str:
        if self._redis is None:
            self._redis = redis_client.connect(
                self._settings.redis_url,
                socket_timeout=BACKEND_TIMEOUT_S,
                socket_connect_timeout=BACKEND_TIMEOUT_S,
                retry=Retry(NoBackoff(), 0),  # one try: the next probe is the retry
            )
        try:
            async with asyncio.timeout(BACKEND_TIMEOUT_S):
                await self._redis.ping()
        except _DOWN:
            return "redis"
        return ""

    async def close(self) -> None:
        async with self._lock:
            if self._pg is not None:
                self._pg.terminate()
            if self._redis is not None:
                await self._redis.aclose()


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a probe waiting on a stuck loop never holds the process up


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the base's signature
        pass


class ProbeServer:
    """The port's HTTP server, on a daemon thread; the routes that ask the loop post to `loop`."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pings = BackendPings(settings)
        self._metrics = make_wsgi_app(REGISTRY)
        self._httpd = make_server("0.0.0.0", settings.metrics_port, self._app, _Server, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="probes", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("probes and metrics served", extra={"event": "metrics.serving", "port": self.port})

    async def close(self) -> None:
        await asyncio.to_thread(self._httpd.shutdown)
        self._httpd.server_close()
        await self._pings.close()

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/livez":
            status, body = self._live()
        elif path == "/readyz":
            status, body = self._ready()
        else:
            exposition: Iterable[bytes] = self._metrics(environ, start_response)
            return exposition
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])  # a new list: wsgiref adds to it
        return [body.encode()]

    def _live(self) -> tuple[str, str]:
        answered = threading.Event()
        try:
            self._loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # the loop is closed: the process is on its way out
            return "503 Service Unavailable", "event loop closed\n"
        if answered.wait(LOOP_DEADLINE_S):
            return "200 OK", "ok\n"
        return "503 Service Unavailable", f"event loop stuck: no callback ran within {LOOP_DEADLINE_S} s\n"

    def _ready(self) -> tuple[str, str]:
        try:
            future = asyncio.run_coroutine_threadsafe(self._pings.failures(), self._loop)
        except RuntimeError:
            return "503 Service Unavailable", "event loop closed\n"
        try:
            down = future.result(BACKEND_TIMEOUT_S + LOOP_DEADLINE_S)
        except TimeoutError:
            future.cancel()
            return "503 Service Unavailable", "event loop stuck: the backends' check did not finish\n"
        if down:
            return "503 Service Unavailable", f"unavailable: {', '.join(down)}\n"
        return "200 OK", "postgresql, redis: ok\n"


def serve(settings: Settings) -> ProbeServer:
    """Start the probe port of this process's running loop (CRONOS_METRICS_PORT, not 0)."""
    try:
        server = ProbeServer(settings, asyncio.get_running_loop())
    except OSError as exc:  # the port is taken, or not ours to bind
        raise ConfigError(
            f"CRONOS_METRICS_PORT: cannot listen on 0.0.0.0:{settings.metrics_port}: {exc.strerror}"
        ) from exc
    server.start()
    return server
