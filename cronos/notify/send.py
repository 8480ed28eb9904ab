"""Sending one notification: a signed webhook, a Slack-compatible incoming webhook, or an email.

HTTP goes through the SSRF-guarded session (cronos.http_guard: every address a name resolves
to is judged, as for http jobs, with CRONOS_HTTP_ALLOW_NETS); SMTP connects only to addresses
the same guard allows (stdlib smtplib, in a thread: a notification is rare, a dependency is not
worth it). A failure is SendFailed with one line that names no secret (a Slack URL is one: it is
never quoted; of a webhook URL only the scheme, host and port are, as a non-admin reader sees it).
"""

from __future__ import annotations

import asyncio
import smtplib
import socket
import ssl
import time
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import aiohttp
import msgspec
from yarl import URL

from cronos.http_guard import guard_refusal, refusal
from cronos.netguard import host_literal_refusal
from cronos.notify import mail
from cronos.notify import message as msg
from cronos.notify.channels import Channel, masked_url
from cronos.redact import SECRET
from cronos.webhooks import signature_headers

ERROR_CHARS = 300


class SendFailed(Exception):
    """The notification was not accepted; `str()` is one line without a secret."""


def message_id(delivery_id: int) -> str:
    """The webhook-id of a delivery: the same on every retry, so a receiver can de-duplicate."""
    return f"msg_cronos_notification_{delivery_id}"


async def send(
    channel: Channel, message: dict[str, Any], delivery_id: int, *, http: aiohttp.ClientSession,
    allow: tuple[str, ...], timeout_s: float,
) -> None:  # fmt: skip
    if channel.kind == "email":
        await _email(channel, message, delivery_id, allow, timeout_s)
        return
    url = channel.url or ""
    shown = SECRET if channel.kind == "slack" else masked_url(url)  # errors are read with a read token
    if channel.kind == "slack":
        body = msgspec.json.encode({"text": msg.slack_text(message)})
        headers = {"Content-Type": "application/json"}
    else:
        body = msgspec.json.encode(message)
        headers = {"Content-Type": "application/json"}
        if channel.secret:
            headers |= signature_headers(channel.secret, message_id(delivery_id), int(time.time()), body)
        else:
            headers |= {"webhook-id": message_id(delivery_id), "webhook-timestamp": str(int(time.time()))}
    await _post(url, shown, body, headers, http=http, allow=allow, timeout_s=timeout_s)


async def _post(
    url: str, shown: str, body: bytes, headers: dict[str, str], *, http: aiohttp.ClientSession,
    allow: tuple[str, ...], timeout_s: float,
) -> None:  # fmt: skip
    try:
        host = URL(url).raw_host or ""
    except ValueError:
        raise SendFailed(f"not a URL: {shown}") from None
    why = host_literal_refusal(host, allow)
    if why is not None:
        raise SendFailed(f"refused by the SSRF guard: {why}")
    try:
        async with http.post(
            url, data=body, headers=headers, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as response:
            if 200 <= response.status < 300:
                return
            text = (await response.content.read(ERROR_CHARS)).decode(errors="replace")
            raise SendFailed(f"HTTP {response.status} from {shown}: {' '.join(text.split())}"[:ERROR_CHARS])
    except aiohttp.ClientError as exc:
        refused = guard_refusal(exc)
        if refused is not None:
            raise SendFailed(f"refused by the SSRF guard: {refused.reason}") from None
        raise SendFailed(f"{type(exc).__name__} posting to {shown}") from None
    except TimeoutError:
        raise SendFailed(f"no answer from {shown} within {timeout_s:g} s") from None


# --- email ------------------------------------------------------------------------------------


def _guarded_socket(host: str, port: int, timeout: float, allow: tuple[str, ...]) -> socket.socket:
    """A connection to the first address of `host` the SSRF guard allows."""
    refused = []
    for family, kind, proto, _, address in socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM):
        why = refusal(str(address[0]), allow)
        if why is not None:
            refused.append(why)
            continue
        sock = socket.socket(family, kind, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            continue
        return sock
    raise SendFailed(f"refused by the SSRF guard: {refused[0]}" if refused else f"cannot connect to {host}:{port}")


class _SMTP(smtplib.SMTP):
    allow: tuple[str, ...] = ()

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return _guarded_socket(host, port, timeout, self.allow)


class _SMTPSSL(smtplib.SMTP_SSL):
    allow: tuple[str, ...] = ()

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = _guarded_socket(host, port, timeout, self.allow)
        return self.context.wrap_socket(sock, server_hostname=self._host)  # type: ignore[attr-defined]


def _mail(channel: Channel, message: dict[str, Any], delivery_id: int) -> EmailMessage:
    smtp = channel.smtp
    assert smtp is not None
    subject, text = msg.email(message)
    try:
        return mail.build(
            subject=subject, body=text, sender=smtp.sender, to=smtp.to, now=datetime.now(UTC),
            msg_id=mail.message_id(delivery_id, message, smtp.sender),
        )  # fmt: skip
    except ValueError as exc:  # a channel saved before its addresses were checked
        raise SendFailed(f"the email cannot be built: {_text(str(exc))}") from None


def _send_mail(channel: Channel, email: EmailMessage, allow: tuple[str, ...], timeout_s: float) -> None:
    smtp = channel.smtp
    assert smtp is not None
    context = ssl.create_default_context()
    client: _SMTP | _SMTPSSL = (
        _SMTPSSL(timeout=timeout_s, context=context) if smtp.security == "ssl" else _SMTP(timeout=timeout_s)
    )
    client.allow = allow
    try:
        client.connect(smtp.host, smtp.port)
        if smtp.security == "starttls":
            client.starttls(context=context)
        if smtp.user is not None and smtp.password is not None:
            client.login(smtp.user, smtp.password)
        client.send_message(email)
    finally:
        try:
            client.quit()
        except (smtplib.SMTPException, OSError):
            client.close()


async def _email(
    channel: Channel, message: dict[str, Any], delivery_id: int, allow: tuple[str, ...], timeout_s: float
) -> None:
    smtp = channel.smtp
    assert smtp is not None
    where = f"{smtp.host}:{smtp.port}"
    email = _mail(channel, message, delivery_id)
    try:
        async with asyncio.timeout(timeout_s * 2):
            await asyncio.to_thread(_send_mail, channel, email, allow, timeout_s)
    except SendFailed:
        raise
    except smtplib.SMTPResponseException as exc:
        raise SendFailed(f"SMTP {exc.smtp_code} from {where}: {_text(exc.smtp_error)}") from None
    except smtplib.SMTPRecipientsRefused:
        raise SendFailed(f"SMTP {where} refused every recipient") from None
    except (smtplib.SMTPException, OSError, TimeoutError) as exc:
        raise SendFailed(f"SMTP {where}: {type(exc).__name__}: {_text(str(exc))}") from None


def _text(value: bytes | str) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    return " ".join(text.split())[:ERROR_CHARS]
