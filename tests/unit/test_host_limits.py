"""cronos.host_limits: CRONOS_HTTP_HOST_LIMITS' grammar, which limit a host gets, a request's key."""

from __future__ import annotations

import pytest

from cronos.errors import ConfigError
from cronos.host_limits import (
    DEFAULT_HOST_LIMIT,
    HostLimit,
    effective_limit,
    host_limit,
    normal_host,
    origin_key,
    parse_host_limits,
)
from cronos.settings import load_settings


def test_entries_are_parsed_lower_case_with_their_ports() -> None:
    assert parse_host_limits(" API.example.com=5, *.internal=10 ,[2001:DB8::7]:8443=2,*:8080=0,*=64,") == (
        HostLimit("api.example.com", None, 5),
        HostLimit("*.internal", None, 10),
        HostLimit("2001:db8::7", 8443, 2),
        HostLimit("*", 8080, 0),
        HostLimit("*", None, 64),
    )
    assert parse_host_limits("") == ()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("api.example.com", "entry 'api.example.com' must be HOST=N"),
        ("api.example.com=x", "entry 'api.example.com=x': the limit must be a whole number from 0"),
        ("a.com=5,b.com=-1", "entry 'b.com=-1': the limit must be"),
        ("a.com=10001", "entry 'a.com=10001': the limit must be a whole number from 0 (no limit) to 10000"),
        ("=5", "entry '=5' must name a host"),
        ("api.*.com=5", "entry 'api.*.com=5': 'api.*.com' must be a host name or address, *.suffix or *"),
        ("*api.com=5", "'*api.com' must be a host name"),
        ("a b.com=5", "'a b.com' must be a host name"),
        ("a.com:99999=5", "entry 'a.com:99999=5': the port must be a number from 1 to 65535"),
        ("a.com:http=5", "the port must be"),
        ("2001:db8::7=5", "must write an IPv6 address in brackets"),
        ("[2001:db8::7=5", "must write an IPv6 address as [address]"),
        ("[nope]=5", "'nope' must be an IPv6 address"),
        ("a.com=5,A.com=6", "entry 'A.com=6' must not repeat a host"),
    ],
)
def test_a_bad_entry_is_named(raw: str, says: str) -> None:
    with pytest.raises(ValueError, match="must") as info:
        parse_host_limits(raw)
    assert says in str(info.value)


def test_the_setting_names_its_variable_and_the_entry() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"CRONOS_HTTP_HOST_LIMITS": "api.example.com=5,*.internal=lots"}, env_file=None)
    assert str(info.value).startswith("CRONOS_HTTP_HOST_LIMITS: entry '*.internal=lots': the limit must")
    settings = load_settings({"CRONOS_HTTP_HOST_LIMITS": "api.example.com=5"}, env_file=None)
    assert settings.http_host_limits == (HostLimit("api.example.com", None, 5),)
    assert load_settings({}, env_file=None).http_host_limits == ()


ENTRIES = parse_host_limits(
    "api.example.com=5, api.example.com:8443=7, *.example.com=10, *.eu.example.com=12, *:9000=3, *=64"
)


@pytest.mark.parametrize(
    ("host", "port", "limit"),
    [
        ("api.example.com", 443, 5),  # its own name beats every suffix
        ("api.example.com", 8443, 7),  # ... and the entry naming its port beats the one without
        ("www.example.com", 443, 10),
        ("a.eu.example.com", 443, 12),  # the longest suffix
        ("example.com", 443, 64),  # *.example.com is the names under it, not itself
        ("other.org", 9000, 3),  # `*` with the port beats `*`
        ("other.org", 443, 64),
    ],
)
def test_the_most_specific_entry_wins(host: str, port: int, limit: int) -> None:
    assert host_limit(ENTRIES, host, port) == limit


def test_a_host_no_entry_names_gets_the_default() -> None:
    assert host_limit((), "example.com", 443) == DEFAULT_HOST_LIMIT == 32
    assert host_limit(parse_host_limits("*.internal=10"), "example.com", 443) == DEFAULT_HOST_LIMIT
    assert host_limit(parse_host_limits("[2001:db8::7]=2"), normal_host("[2001:DB8:0::7]"), 80) == 2


def test_a_job_lowers_its_hosts_limit_never_raises_it() -> None:
    assert effective_limit(32, None) == 32
    assert effective_limit(32, 3) == 3
    assert effective_limit(5, 100) == 5
    assert effective_limit(0, None) is None  # no limit
    assert effective_limit(0, 4) == 4


def test_the_key_is_scheme_host_and_port() -> None:
    assert origin_key("https", normal_host("API.Example.com."), 443) == "https://api.example.com:443"
    assert origin_key("http", normal_host("2001:DB8::7"), 80) == "http://[2001:db8::7]:80"
