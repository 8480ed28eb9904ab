"""Real receivers for notification tests: an HTTP server that checks Standard Webhooks signatures
(and answers with the statuses it is told, slowly if asked), and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email import policy as email_policy
from email.message import Message
from typing import Any

import msgspec
from aiohttp import web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.cluster.servers import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def json(self) -> Any:
        return msgspec.json.decode(self.body)


@dataclass
class HttpReceiver:
    """Answers each request with the next of `statuses` (the last one once they run out)."""

    statuses: list[int] = field(default_factory=lambda: [200])
    delay_s: float = 0.0
    seen: list[Received] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)  # webhook-ids as requests come in (before any delay)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.arrived.append(request.headers.get("webhook-id", ""))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.seen.append(Received(request.path, dict(request.headers), body, status))
        return web.Response(status=status, text="ok" if status < 300 else "receiver says no")

    def accepted(self) -> list[Received]:
        return [r for r in self.seen if 200 <= r.status < 300]


@contextlib.asynccontextmanager
async def http_receiver(**kwargs: Any) -> AsyncIterator[HttpReceiver]:
    receiver = HttpReceiver(**kwargs)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}/hooks/cronos"
    try:
        yield receiver
    finally:
        await runner.cleanup()


USER, PASSWORD = "cronos", "smtp-pa55word-9"


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.logins: list[str] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd calls it by this name
        # As a mail client reads it: headers unfolded and their encoded words decoded.
        self.messages.append(message_from_bytes(envelope.content, policy=email_policy.default))
        return "250 OK"


@dataclass
class SmtpServer:
    host: str
    port: int
    mailbox: _Mailbox


@contextlib.contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    """A real SMTP server on loopback that takes LOGIN/PLAIN with USER/PASSWORD (no TLS)."""
    mailbox = _Mailbox()

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (USER.encode(), PASSWORD.encode())
        if ok:
            mailbox.logins.append(USER)
        return AuthResult(success=ok)

    port = free_port()
    controller = Controller(
        mailbox, hostname="127.0.0.1", port=port, authenticator=authenticate, auth_require_tls=False
    )
    controller.start()
    try:
        yield SmtpServer("127.0.0.1", port, mailbox)
    finally:
        controller.stop()
