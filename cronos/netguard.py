"""The SSRF guard's rules: which addresses an http job may not reach, and why.

Pure (stdlib only). `address_refusal` judges one address (the executor calls it on every
address DNS gives it, before connecting); `literal_host_refusal` judges a URL whose host is
written as an address -- in any form the C library accepts (`2852039166`, `0177.0.0.1`,
`0x7f.1`, `127.1`, `[::ffff:127.0.0.1]`) -- or as `localhost`, so the API can refuse it when
a job is saved. Other names pass there; they are judged after resolution at run time.

A refusal is one line naming the address, the range it falls in and how to allow it.
IPv6 forms that carry an IPv4 address (mapped, translated, NAT64, 6to4; compatible and
Teredo too) are judged by it, by the IPv4 rules and the IPv4 entries of the allow-list only:
`::/0` in the allow-list does not open `::ffff:127.0.0.1`.
"""

from __future__ import annotations

import functools
import ipaddress
import unicodedata
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_VARIABLE = "CRONOS_HTTP_ALLOW_NETS"


def _table(*rows: tuple[str, str]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(cidr), name) for cidr, name in rows)


# Most specific first: the first range that holds the address names the refusal.
_V4_RULES = _table(
    ("255.255.255.255/32", "broadcast"),
    ("0.0.0.0/8", "unspecified, 'this network'"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space, CGNAT"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved for IETF protocol assignments"),
    ("192.0.2.0/24", "reserved for documentation"),
    ("192.88.99.0/24", "reserved, 6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved for benchmarking"),
    ("198.51.100.0/24", "reserved for documentation"),
    ("203.0.113.0/24", "reserved for documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_RULES = _table(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001:db8::/32", "reserved for documentation"),
    ("2001::/23", "reserved for IETF protocol assignments"),
    ("3fff::/20", "reserved for documentation"),
    ("fc00::/7", "private, unique local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local, deprecated"),
    ("ff00::/8", "multicast"),
    ("::/8", "reserved"),
    ("5f00::/16", "reserved for SRv6 SIDs"),
)
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


@functools.lru_cache(maxsize=16)
def _networks(allow: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in allow)


def _allowed(address: Address, nets: tuple[Network, ...]) -> bool:
    # `in` compares integers only: a version check keeps 127.0.0.1 out of ::/96.
    return any(net.version == address.version and address in net for net in nets)


def _embedded(address: ipaddress.IPv6Address) -> tuple[str, tuple[ipaddress.IPv4Address, ...], bool] | None:
    """The IPv4 addresses an IPv6 form carries, the form's name with its prefix, and whether
    the IPv4 addresses are all there is to judge (the form reaches them and nothing else)."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if address in _MAPPED:
        return f"IPv4-mapped ({_MAPPED})", (low32,), True
    if address in _TRANSLATED:
        return f"IPv4-translated ({_TRANSLATED})", (low32,), True
    if address in _NAT64:
        return f"NAT64 ({_NAT64})", (low32,), True
    if address in _SIX_TO_FOUR:
        return f"6to4 ({_SIX_TO_FOUR})", (ipaddress.IPv4Address((int(address) >> 80) & 0xFFFF_FFFF),), True
    if address in _TEREDO and address.teredo is not None:  # a tunnel to the client, through the server
        server, client = address.teredo
        return f"Teredo ({_TEREDO})", (client, server), False
    if address in _COMPATIBLE and int(address) > 1:  # not :: or ::1, which have rules of their own
        return f"IPv4-compatible ({_COMPATIBLE})", (low32,), False
    return None


def _rule(address: Address, nets: tuple[Network, ...]) -> str | None:
    """Why `address` is refused ("link-local (169.254.0.0/16)"), or None when it may be reached."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:  # fe80::1%eth0: the zone does not change the range
            address = ipaddress.IPv6Address(int(address))
        # Before the allow-list: an IPv6 entry (::/0) must not open the IPv4 ranges through
        # ::ffff:127.0.0.1. The IPv4 address inside is judged by the IPv4 rules and entries only.
        embedded = _embedded(address)
        if embedded is not None:
            form, inners, only = embedded
            for inner in inners:
                why = _rule(inner, nets)
                if why is not None:
                    return f"{form} for {inner}, which is {why}"
            if only:
                return None
            if not _allowed(address, nets) and form.startswith("IPv4-compatible"):
                # Deprecated, and no stack routes it to `inner` anyway: nothing to reach there.
                return f"{form}, deprecated"
    if _allowed(address, nets):
        return None
    rules = _V6_RULES if isinstance(address, ipaddress.IPv6Address) else _V4_RULES
    for net, name in rules:
        if address in net:
            return f"{name} ({net})"
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST:
        return f"outside global unicast ({_GLOBAL_UNICAST})"
    if not address.is_global:  # a range named after this table was written
        return "not a global address (Python's ipaddress)"
    return None


def address_refusal(address: Address, allow: Sequence[str]) -> str | None:
    """None when `address` may be reached; else why not, in one line.

    `allow`: CIDRs that may be reached anyway (settings.http_allow_nets).
    """
    return _refusal(str(address), address, _networks(tuple(allow)))


def _refusal(shown: str, address: Address, nets: tuple[Network, ...]) -> str | None:
    why = _rule(address, nets)
    if why is None:
        return None
    named = shown if shown == str(address) else f"{shown} (= {address})"
    return f"{named} is {why}; allow it with {ALLOW_VARIABLE}"


# --- literal hosts ----------------------------------------------------------------------

_DIGITS = {8: frozenset("01234567"), 10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


def parse_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """`text` read as inet_aton(3) reads it: 1-4 parts, each decimal, octal (0...) or hex (0x...),
    the last filling the remaining bytes (`127.1`, `0x7f000001`, `0177.0.0.1`). None if it is not one."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        if part[:2] in ("0x", "0X"):
            digits, base = part[2:], 16
        elif len(part) > 1 and part[0] == "0":
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        # An explicit digit set: int() would also take "_", signs, spaces and non-ASCII digits.
        if not digits or not set(digits) <= _DIGITS[base]:
            return None
        values.append(int(digits, base))
    *head, last = values
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = last
    for i, value in enumerate(head):
        number |= value << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def _hosts(url: str) -> set[str]:
    """The host of `url` as a URL parser may read it (a backslash taken as a slash too),
    normalized: percent-decoded, NFKC (as IDNA maps fullwidth digits), lower case, no final dot."""
    hosts = set()
    for candidate in (url, url.replace("\\", "/")):
        try:
            host = urlsplit(candidate.strip()).hostname
        except ValueError:
            continue
        if host:
            hosts.add(_normalized(host))
    return hosts


def _normalized(host: str) -> str:
    host = unicodedata.normalize("NFKC", unquote(host)).lower().replace("\u3002", ".")
    return host[:-1] if host.endswith(".") else host


_LOCALHOST = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))


def _host_refusal(host: str, nets: tuple[Network, ...], *, names: bool = True) -> str | None:
    if names and (host == "localhost" or host.endswith(".localhost")):
        if any(_allowed(a, nets) for a in _LOCALHOST):
            return None
        return f"{host} is loopback (the name localhost, RFC 6761); allow it with {ALLOW_VARIABLE}"
    address: Address | None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = parse_ipv4(host)
    return None if address is None else _refusal(host, address, nets)


def literal_host_refusal(url: str, allow: Sequence[str]) -> str | None:
    """None unless the host of `url` is an address literal (any form) or localhost that is refused."""
    nets = _networks(tuple(allow))
    for host in sorted(_hosts(url)):
        why = _host_refusal(host, nets)
        if why is not None:
            return why
    return None


def host_literal_refusal(host: str, allow: Sequence[str]) -> str | None:
    """For a host as a client connects to it (no brackets): None unless it is an address
    literal, in any form, that is refused. Names, localhost too, are left to the resolver."""
    return _host_refusal(_normalized(host.strip("[]")), _networks(tuple(allow)), names=False)
