"""cronos/netguard.py: the SSRF guard's rules, and IPv4 literals read as the C library reads them."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronos.netguard import address_refusal, host_literal_refusal, literal_host_refusal, parse_ipv4

TAIL = "; allow it with CRONOS_HTTP_ALLOW_NETS"


# Refused ranges are named.
RANGES = [
    ("127.0.0.1", "loopback (127.0.0.0/8)"),
    ("127.255.0.9", "loopback (127.0.0.0/8)"),
    ("10.255.255.1", "private (10.0.0.0/8)"),
    ("172.31.0.1", "private (172.16.0.0/12)"),
    ("192.168.1.1", "private (192.168.0.0/16)"),
    ("169.254.169.254", "link-local (169.254.0.0/16)"),
    ("100.64.0.1", "shared address space, CGNAT (100.64.0.0/10)"),
    ("224.0.0.251", "multicast (224.0.0.0/4)"),
    ("0.0.0.0", "unspecified, 'this network' (0.0.0.0/8)"),
    ("240.0.0.1", "reserved (240.0.0.0/4)"),
    ("255.255.255.255", "broadcast (255.255.255.255/32)"),
    ("192.0.0.8", "reserved for IETF protocol assignments (192.0.0.0/24)"),
    ("192.0.2.1", "reserved for documentation (192.0.2.0/24)"),
    ("198.18.0.1", "reserved for benchmarking (198.18.0.0/15)"),
    ("198.51.100.7", "reserved for documentation (198.51.100.0/24)"),
    ("203.0.113.7", "reserved for documentation (203.0.113.0/24)"),
    ("::1", "loopback (::1/128)"),
    ("::", "unspecified (::/128)"),
    ("fd00::1", "private, unique local (fc00::/7)"),
    ("fe80::1", "link-local (fe80::/10)"),
    ("ff02::1", "multicast (ff00::/8)"),
    ("2001:db8::1", "reserved for documentation (2001:db8::/32)"),
    ("100::1", "discard-only (100::/64)"),
    ("4000::1", "outside global unicast (2000::/3)"),
]
# IPv6 forms are judged by the IPv4 address inside.
IPV4_INSIDE = [
    ("::ffff:7f00:1", "IPv4-mapped (::ffff:0:0/96) for 127.0.0.1, which is loopback (127.0.0.0/8)"),
    ("64:ff9b::a9fe:a9fe", "NAT64 (64:ff9b::/96) for 169.254.169.254, which is link-local (169.254.0.0/16)"),
    ("2002:a00:1::", "6to4 (2002::/16) for 10.0.0.1, which is private (10.0.0.0/8)"),
    ("::a00:1", "IPv4-compatible (::/96) for 10.0.0.1, which is private (10.0.0.0/8)"),
]


@pytest.mark.parametrize(("address", "why"), RANGES + IPV4_INSIDE)
def test_refusals_name_the_range(address: str, why: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), ()) == f"{address} is {why}{TAIL}"


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:808:808", "2002:808:808::"])
def test_global_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), ()) is None


def test_allow_list_lets_a_range_through() -> None:
    allow = ("127.0.0.0/8", "fd00::/8")
    assert address_refusal(ipaddress.ip_address("127.0.0.2"), allow) is None
    assert address_refusal(ipaddress.ip_address("::ffff:127.0.0.2"), allow) is None  # the same place
    assert address_refusal(ipaddress.ip_address("fd00::5"), allow) is None
    assert address_refusal(ipaddress.ip_address("10.0.0.1"), allow) is not None
    assert address_refusal(ipaddress.ip_address("::1"), allow) is not None  # an IPv4 net allows no IPv6


def test_zone_of_a_link_local_address_does_not_hide_it() -> None:
    why = address_refusal(ipaddress.ip_address("fe80::1%eth0"), ())
    assert why is not None and "link-local (fe80::/10)" in why


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is link-local (169.254.0.0/16)"),
        ("http://2852039166/", "2852039166 (= 169.254.169.254) is link-local (169.254.0.0/16)"),
        ("http://0177.0.0.1/", "0177.0.0.1 (= 127.0.0.1) is loopback (127.0.0.0/8)"),
        ("http://0x7f.0.0.1:8080/", "0x7f.0.0.1 (= 127.0.0.1) is loopback (127.0.0.0/8)"),
        ("http://0x7f000001/", "0x7f000001 (= 127.0.0.1) is loopback (127.0.0.0/8)"),
        ("http://127.1/", "127.1 (= 127.0.0.1) is loopback (127.0.0.0/8)"),
        ("http://10.1/x", "10.1 (= 10.0.0.1) is private (10.0.0.0/8)"),
        ("https://user:pw@[::1]:6379/", "::1 is loopback (::1/128)"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 (= ::ffff:7f00:1) is IPv4-mapped (::ffff:0:0/96)"),
        ("http://[fe80::1%25eth0]/", "fe80::1%eth0 is link-local (fe80::/10)"),
        ("http://localhost:5432/", "localhost is loopback (the name localhost, RFC 6761)"),
        ("http://LocalHost./", "localhost is loopback"),
        ("http://api.localhost/", "api.localhost is loopback"),
        ("http://%31%32%37.0.0.1/", "127.0.0.1 is loopback"),  # percent-encoded
        ("http://\uff11\uff12\uff17.0.0.1/", "127.0.0.1 is loopback"),  # fullwidth digits, as IDNA maps them
        ("http://127.0.0.1./", "127.0.0.1 is loopback"),
        ("http://example.com\\@127.0.0.1/", "127.0.0.1 is loopback"),  # whichever way a parser reads it
    ],
)
def test_literal_hosts_refused(url: str, why: str) -> None:
    got = literal_host_refusal(url, ())
    assert got is not None and got.startswith(why) and got.endswith(TAIL), got


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://8.8.8.8/", "http://[2606:4700::1111]/", "http://10.0.0.1.example.com/",
     "http://localhost.example.com/", "http://4294967296/", "not a url", "http://[::1/"],
)  # fmt: skip
def test_names_and_global_literals_pass(url: str) -> None:
    assert literal_host_refusal(url, ()) is None


def test_literal_allowed_by_the_allow_list() -> None:
    allow = ("127.0.0.0/8",)
    assert literal_host_refusal("http://127.0.0.1:9/", allow) is None
    assert literal_host_refusal("http://0177.1/", allow) is None
    assert literal_host_refusal("http://localhost/", allow) is None
    assert literal_host_refusal("http://[::1]/", allow) is not None


# --- the legacy IPv4 forms agree with the C library ---------------------------------------


@pytest.mark.parametrize(
    ("text", "address"),
    [("2852039166", "169.254.169.254"), ("0177.0.0.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
     ("0x7f000001", "127.0.0.1"), ("127.1", "127.0.0.1"), ("10.1", "10.0.0.1"), ("1.2.3", "1.2.0.3"),
     ("0", "0.0.0.0"), ("00", "0.0.0.0"), ("0X0A.0", "10.0.0.0")],
)  # fmt: skip
def test_parse_ipv4_forms(text: str, address: str) -> None:
    assert parse_ipv4(text) == ipaddress.IPv4Address(address)
    assert socket.inet_aton(text) == ipaddress.IPv4Address(address).packed


@pytest.mark.parametrize(
    "text", ["", "0x", "08", "1..2", "1.2.3.4.5", "256.1", "4294967296", "0x7_f", "-1", "1.2.3.4."]
)
def test_parse_ipv4_refuses_what_is_not_an_address(text: str) -> None:
    assert parse_ipv4(text) is None


def _inet_aton(text: str) -> bytes | None:
    try:
        return socket.inet_aton(text)
    except OSError:
        return None


_PART = st.one_of(
    st.integers(0, 2**32).map(str),
    st.integers(0, 2**32).map(lambda n: f"0{n:o}"),
    st.integers(0, 2**32).map(lambda n: f"0x{n:x}"),
    st.text("0123456789abcdefxX", max_size=6),
)


@given(st.lists(_PART, min_size=1, max_size=5).map(".".join) | st.text("0123456789abcdefxX.", max_size=16))
def test_parse_ipv4_agrees_with_inet_aton(text: str) -> None:
    parsed = parse_ipv4(text)
    assert _inet_aton(text) == (parsed.packed if parsed is not None else None)


@pytest.mark.parametrize(
    ("host", "why"),
    [("0177.0.0.1", "0177.0.0.1 (= 127.0.0.1) is loopback"), ("::1", "::1 is loopback"),
     ("[::1]", "::1 is loopback"), ("fe80::1%25eth0", "fe80::1%eth0 is link-local"),
     ("2852039166", "2852039166 (= 169.254.169.254) is link-local")],
)  # fmt: skip
def test_host_literal_refusal_judges_literals(host: str, why: str) -> None:
    got = host_literal_refusal(host, ())
    assert got is not None and got.startswith(why)


@pytest.mark.parametrize("host", ["localhost", "example.com", "8.8.8.8"])
def test_host_literal_refusal_leaves_names_to_the_resolver(host: str) -> None:
    assert host_literal_refusal(host, ()) is None


# --- an IPv6 allow-list does not open the IPv4 ranges (issue 22, item 8) --------------------

EVERY_IPV6 = ("127.0.0.0/8", "::/0")  # loopback IPv4 for the tests' receivers, and any IPv6 address

# Each of these reaches (or names) an IPv4 address: it is judged by that address and the IPv4
# entries of the allow-list only, whatever the IPv6 entries say.
EMBEDDED_UNDER_EVERY_IPV6 = [
    ("::ffff:169.254.169.254", "IPv4-mapped (::ffff:0:0/96) for 169.254.169.254, which is link-local"),
    ("::ffff:10.0.0.1", "IPv4-mapped (::ffff:0:0/96) for 10.0.0.1, which is private"),
    ("::ffff:0:a00:1", "IPv4-translated (::ffff:0:0:0/96) for 10.0.0.1, which is private"),
    ("64:ff9b::a9fe:a9fe", "NAT64 (64:ff9b::/96) for 169.254.169.254, which is link-local"),
    ("2002:a9fe:a9fe::1", "6to4 (2002::/16) for 169.254.169.254, which is link-local"),
    ("::a9fe:a9fe", "IPv4-compatible (::/96) for 169.254.169.254, which is link-local"),
    # Teredo: the client's address is stored inverted (~10.0.0.1 = f5ff:fffe), the server's plain.
    ("2001:0:808:808::f5ff:fffe", "Teredo (2001::/32) for 10.0.0.1, which is private"),
    ("2001:0:a9fe:a9fe::f7f7:f7f7", "Teredo (2001::/32) for 169.254.169.254, which is link-local"),
]


@pytest.mark.parametrize(("address", "why"), EMBEDDED_UNDER_EVERY_IPV6)
def test_embedded_ipv4_is_judged_by_the_ipv4_rules_under_an_ipv6_allow_list(address: str, why: str) -> None:
    got = address_refusal(ipaddress.ip_address(address), EVERY_IPV6)
    assert got is not None and why in got and got.endswith(TAIL), got


@pytest.mark.parametrize("allow", [EVERY_IPV6, ("::ffff:0:0/96",), ("::ffff:169.254.169.254/128",), ("2002::/16",)])
def test_no_ipv6_entry_allows_an_embedded_ipv4_address(allow: tuple[str, ...]) -> None:
    for address in ("::ffff:169.254.169.254", "2002:a9fe:a9fe::"):
        assert address_refusal(ipaddress.ip_address(address), allow) is not None, (address, allow)


@pytest.mark.parametrize("address", ["::ffff:127.0.0.1", "::ffff:7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::"])
def test_embedded_ipv4_is_allowed_by_the_ipv4_entries(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), ("127.0.0.0/8",)) is None


def test_compatible_and_teredo_forms_also_need_their_own_ipv6_entry() -> None:
    """Deprecated or tunnelled: the IPv4 entries alone do not open them (the IPv6 rules still apply)."""
    ipv4_only = ("127.0.0.0/8", "8.8.8.0/24")
    for address in ("::127.0.0.1", "2001:0:808:808::f7f7:f7f7"):
        assert address_refusal(ipaddress.ip_address(address), ipv4_only) is not None, address
        assert address_refusal(ipaddress.ip_address(address), EVERY_IPV6) is None, address


def test_an_ipv6_allow_list_still_allows_ipv6() -> None:
    for address in ("::1", "fd00::1", "fe80::1", "2001:0:808:808::f7f7:f7f7"):  # Teredo for 8.8.8.8 both ways
        assert address_refusal(ipaddress.ip_address(address), EVERY_IPV6) is None, address
    assert address_refusal(ipaddress.ip_address("2001:0:808:808::f7f7:f7f7"), ()) is not None  # not by default


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::ffff:127.0.0.1]:9300/", "for 127.0.0.1, which is loopback"),
        ("http://[::ffff:7f00:1]:9300/", "for 127.0.0.1, which is loopback"),
        ("http://[::ffff:169.254.169.254]/", "for 169.254.169.254, which is link-local"),
        ("http://[64:ff9b::a9fe:a9fe]/", "for 169.254.169.254, which is link-local"),
    ],
)
def test_literal_embedded_ipv4_refused_under_an_ipv6_allow_list(url: str, why: str) -> None:
    closed = ("::/0",)
    got = literal_host_refusal(url, closed)
    assert got is not None and why in got, got
    host = url.split("[", 1)[1].split("]", 1)[0]
    assert host_literal_refusal(host, closed) == got
