"""Per-host limits of concurrent http requests: the setting's grammar, which limit a host gets,
and a request's key. Pure: no I/O (the executor's `executor.host_limits` enforces them).

    CRONOS_HTTP_HOST_LIMITS="api.example.com=5, *.internal=10, [2001:db8::7]:8443=2, *=64"

Comma-separated `HOST=N` entries. HOST is a name or an address (IPv6 in brackets), with `:PORT`
or without (any port); `*.example.com` stands for every name under example.com (not example.com
itself), `*` alone for every host. N is a whole number from 0 to 10000; 0 is no limit. A host
gets the limit of its most specific entry: its own name, else the longest `*.suffix`, else `*`,
else DEFAULT_HOST_LIMIT; of two entries for the same host, the one naming its port wins.

A job may ask for less (`host_limit` in its http payload) but never for more than its host's
limit: raising a target's limit is the operator's call (a `write` token must not be able to
stampede a host the operator protects).
"""

from __future__ import annotations

import ipaddress
import re

import msgspec

# Why 32: a herd of 1,000 quick requests (50 ms) to one healthy host still ends within ~2 s, while
# a small target (a pod with a few dozen workers, a server's default backlog) is no longer sent
# the executor's 2,000 execution slots at once; it is per executor process (N executors: N x 32).
DEFAULT_HOST_LIMIT = 32
MAX_HOST_LIMIT = 10_000

_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")  # a DNS name or a dotted IPv4 address


class HostLimit(msgspec.Struct, frozen=True):
    """One entry of CRONOS_HTTP_HOST_LIMITS."""

    host: str  # a lower-case name or address, "*.suffix" or "*"
    port: int | None  # None: any port
    limit: int  # 0: no limit


def parse_host_limits(raw: str) -> tuple[HostLimit, ...]:
    """The entries of CRONOS_HTTP_HOST_LIMITS; a ValueError naming the entry at fault."""
    entries: list[HostLimit] = []
    seen: set[tuple[str, int | None]] = set()
    for part in raw.split(","):
        entry = part.strip()
        if not entry:
            continue
        pattern, equals, number = entry.rpartition("=")
        if not equals:
            raise ValueError(f"entry {entry!r} must be HOST=N (such as api.example.com=5)")
        try:
            limit = int(number.strip())
        except ValueError:
            limit = -1
        if not 0 <= limit <= MAX_HOST_LIMIT:
            raise ValueError(f"entry {entry!r}: the limit must be a whole number from 0 (no limit) to {MAX_HOST_LIMIT}")
        host, port = _pattern(entry, pattern.strip().lower())
        if (host, port) in seen:
            raise ValueError(f"entry {entry!r} must not repeat a host already given a limit")
        seen.add((host, port))
        entries.append(HostLimit(host, port, limit))
    return tuple(entries)


def _pattern(entry: str, pattern: str) -> tuple[str, int | None]:
    """(host, port) of an entry's HOST part."""
    if not pattern:
        raise ValueError(f"entry {entry!r} must name a host before the =")
    port_text: str | None = None
    if pattern.startswith("["):
        inside, bracket, rest = pattern[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"entry {entry!r} must write an IPv6 address as [address] or [address]:port")
        host, port_text = inside, rest[1:] if rest else None
        try:
            host = ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise ValueError(f"entry {entry!r}: {host!r} must be an IPv6 address") from None
    else:
        if pattern.count(":") > 1:
            raise ValueError(f"entry {entry!r} must write an IPv6 address in brackets: [address]")
        host, colon, port_text = pattern.partition(":")
        port_text = port_text if colon else None
        name = host[2:] if host.startswith("*.") else host
        if host != "*" and not _NAME.fullmatch(name.rstrip(".")):
            raise ValueError(
                f"entry {entry!r}: {host!r} must be a host name or address, *.suffix or * (a * stands only"
                " for the leading labels)"
            )
        host = host.rstrip(".")
    port: int | None = None
    if port_text is not None:
        port = int(port_text) if port_text.isdigit() else 0
        if not 1 <= port <= 65535:
            raise ValueError(f"entry {entry!r}: the port must be a number from 1 to 65535")
    return host, port


def normal_host(host: str) -> str:
    """A URL's host as entries name it: lower case, no final dot, an IPv6 address compressed."""
    host = host.lower().rstrip(".")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.strip("[]")).compressed
        except ValueError:
            return host
    return host


def host_limit(entries: tuple[HostLimit, ...], host: str, port: int, default: int = DEFAULT_HOST_LIMIT) -> int:
    """The limit `host` (as normal_host writes it) on `port` gets; 0: no limit."""
    best: tuple[int, bool] | None = None
    limit = default
    for entry in entries:
        if entry.port is not None and entry.port != port:
            continue
        if entry.host == host:
            rank = len(host) + 1_000  # its own name beats any suffix
        elif entry.host == "*":
            rank = 0
        elif entry.host.startswith("*.") and host.endswith(entry.host[1:]):
            rank = len(entry.host)
        else:
            continue
        key = (rank, entry.port is not None)
        if best is None or key > best:
            best, limit = key, entry.limit
    return limit


def effective_limit(host: int, job: int | None) -> int | None:
    """The limit a request observes: its host's, lowered by its job's; None: no limit."""
    if host == 0:
        return job
    return host if job is None else min(host, job)


def origin_key(scheme: str, host: str, port: int) -> str:
    """The key requests share a limit by: scheme, host and port, as `https://api.example.com:443`."""
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"
