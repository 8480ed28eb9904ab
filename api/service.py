"""ApiService: the API as a Role (`async with ApiService(settings) as svc: await svc.run()`).

It listens on api.auth.listen_host(settings):settings.port (port 0: an ephemeral port, then `svc.port`
says which) and answers even while PostgreSQL or Redis is down: connections are opened lazily.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Self

from aiohttp import web

from api.app import ACCESS_LOG, SERVER_LOG, AccessLogger, create_app
from api.auth import check_listen_host, listen_host, mode_of
from cronos.errors import ConfigError
from cronos.settings import Settings
from cronos.store.db import mask_dsn

log = logging.getLogger("cronos.api")


KEEPALIVE_S = 15.0


class ApiService:
    name = "api"

    def __init__(self, settings: Settings, *, host: str | None = None) -> None:
        self.settings = settings
        self.host = listen_host(settings) if host is None else host
        check_listen_host(settings, self.host)  # before anything listens: one line, exit 1
        self.port = settings.port
        self.app = create_app(settings)
        self._runner = web.AppRunner(
            self.app,
            access_log_class=AccessLogger,
            access_log=ACCESS_LOG,
            logger=SERVER_LOG,  # a malformed request: one INFO line (api.app.MalformedRequests)
            handle_signals=False,
            shutdown_timeout=5.0,
            # aiohttp has no header-read timeout: a client trickling its headers is cut only by
            # the keep-alive timeout (default an hour). 15 s bounds that; request bodies have
            # their own 30 s deadline (api.bodies). Production puts a reverse proxy in front.
            keepalive_timeout=KEEPALIVE_S,
        )
        self._stopped = asyncio.Event()

    async def __aenter__(self) -> Self:
        await self._runner.setup()
        try:
            site = web.TCPSite(self._runner, self.host, self.settings.port)
            await site.start()
        except OSError as exc:  # e.g. the port is taken: one clear line from the CLI, not a traceback
            await self._runner.cleanup()
            raise ConfigError(f"PORT: cannot listen on {self.host}:{self.settings.port}: {exc.strerror}") from exc
        except BaseException:
            await self._runner.cleanup()
            raise
        self.port = int(self._runner.addresses[0][1])
        log.info(
            "api listening",
            extra={
                "event": "api.listening",
                "host": self.host,
                "port": self.port,
                "database": mask_dsn(self.settings.database_url),
                "redis": mask_dsn(self.settings.redis_url),
            },
        )
        level, mode = mode_of(self.settings)
        log.log(level, mode, extra={"event": "api.auth_mode", "auth": self.settings.auth, "host": self.host})
        return self

    async def run(self) -> None:
        await self._stopped.wait()

    def stop(self) -> None:
        self._stopped.set()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        await self._runner.cleanup()
        log.info("api stopped", extra={"event": "api.stopped"})
