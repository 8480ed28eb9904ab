"""The SSRF-guarded HTTP client: it connects only to addresses the SSRF guard allows (http runs
and the leader's notification webhooks).

The check sits where the address is chosen, so what was checked is what is connected to
(a DNS answer cannot change in between, as it could if a name were checked then resolved
again): the resolver drops refused addresses from every answer, and the socket factory
refuses any other address before a socket exists (aiohttp skips the resolver for address
literals). `executor.kinds.http` also checks literals itself first, for a clean message.
No proxies or settings from the environment (trust_env stays False).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from cronos.netguard import address_refusal

PREFIX = "refused by the SSRF guard: "


class GuardRefused(OSError):
    """No address the guard allows: the run fails with `reason` (one line naming the rule)."""

    def __init__(self, reason: str) -> None:
        super().__init__(PREFIX + reason)
        self.reason = reason


def refusal(address: str, allow: Sequence[str]) -> str | None:
    """address_refusal for an address as sockets write it ("fe80::1%eth0" too); unreadable: refused."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return f"{address!r} is not an IP address"
    return address_refusal(parsed, allow)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver with every refused address dropped; none left -> GuardRefused."""

    def __init__(self, allow: Sequence[str], inner: AbstractResolver | None = None) -> None:
        self._allow = tuple(allow)
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        kept: list[ResolveResult] = []
        refused: list[str] = []
        for result in await self._inner.resolve(host, port, family):
            why = refusal(result["host"], self._allow)
            if why is None:
                kept.append(result)
            else:
                refused.append(why)
        if not kept:
            raise GuardRefused(f"{host} -> {refused[0]}" if refused else f"{host} resolves to no address")
        return kept

    async def close(self) -> None:
        await self._inner.close()


def guarded_socket_factory(allow: Sequence[str]) -> Callable[[Any], socket.socket]:
    """The last check, on the very address a socket is about to connect to."""
    allowed = tuple(allow)

    def make(addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        why = refusal(str(sockaddr[0]), allowed)
        if why is not None:
            raise GuardRefused(why)
        return socket.socket(family, type_, proto)

    return make


def guarded_session(allow: Sequence[str], *, limit: int = 100) -> aiohttp.ClientSession:
    """A ClientSession for http runs (call inside the running loop; close it when done), with at
    most `limit` connections at once (aiohttp's default 100)."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(allow), socket_factory=guarded_socket_factory(allow), limit=limit
    )
    return aiohttp.ClientSession(connector=connector, trust_env=False)


def guard_refusal(exc: BaseException) -> GuardRefused | None:
    """The GuardRefused behind an aiohttp error (aiohttp wraps resolver and socket errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, GuardRefused):
            return current
        seen.add(id(current))
        os_error = getattr(current, "os_error", None)  # ClientConnectorError keeps its cause here too
        if isinstance(os_error, GuardRefused):
            return os_error
        current = current.__cause__ or current.__context__
    return None
