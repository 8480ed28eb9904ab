"""A throwaway HTTP server for the tests' http jobs: one handler for every method and path."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web


async def serve(handle: Callable[[web.Request], Awaitable[web.StreamResponse]], host: str) -> tuple[web.AppRunner, int]:
    """Serve `handle` on `host` at a free port: the runner (cleanup() stops it) and the port."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
