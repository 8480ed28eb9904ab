"""cronos.secret_bounds: where an http job's secrets may go (issue 36). Pure."""

from __future__ import annotations

import pytest

from cronos.secret_bounds import HOST_FIELD, URL_FIELD, Place, host_header, moved, place_of

ENTERED = place_of("https://API.example.com/hook?page=1", {"Host": "Tenant-A.example"})


def test_a_place_is_scheme_host_port_path_and_host_header() -> None:
    assert Place("https", "api.example.com", 443, "/hook", (("host", "tenant-a.example"),)) == ENTERED
    assert place_of("http://[2001:db8::1]:8080", None) == Place("http", "2001:db8::1", 8080, "/", ())
    assert place_of("not a url", None) is None and place_of("http://[::1", None) is None
    assert host_header({"host": "b", "HOST": " A ", "Accept": "x"}) == (("host", "a"), ("host", "b"))  # every Host
    assert host_header({"X-Forwarded-Host": "T", "Forwarded": "host=t"}) == (
        ("forwarded", "host=t"),
        ("x-forwarded-host", "t"),
    )
    assert host_header("not headers") == ()


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("https://api.example.com:443/hook", {"host": "tenant-a.EXAMPLE"}),  # the default port, spelled out
        ("HTTPS://api.example.com/hook?page=2#x", {"HOST": "tenant-a.example"}),  # query and fragment
        ("https://user:pw@api.example.com/hook", {"Host": "tenant-a.example"}),  # credentials are no place
    ],
)
def test_the_same_place(url: str, headers: dict[str, str]) -> None:
    assert moved(ENTERED, place_of(url, headers)) is None


@pytest.mark.parametrize(
    ("url", "headers", "field"),
    [
        ("https://api.example.com/hook", {}, HOST_FIELD),  # Host removed
        ("https://api.example.com/hook", {"Host": "tenant-b.example"}, HOST_FIELD),
        ("https://api.example.com/hook", {"Host": "tenant-a.example", "host": "tenant-b.example"}, HOST_FIELD),
        # The headers an ingress or proxy may route by move the secrets as Host does (the probe's finding).
        (
            "https://api.example.com/hook",
            {"Host": "tenant-a.example", "X-Forwarded-Host": "tenant-b.example"},
            "$.payload.headers.X-Forwarded-Host",
        ),
        (
            "https://api.example.com/hook",
            {"Host": "tenant-a.example", "forwarded": "host=tenant-b.example"},
            "$.payload.headers.Forwarded",
        ),
        ("http://api.example.com/hook", {"Host": "tenant-a.example"}, URL_FIELD),  # scheme
        ("https://api.example.com:8443/hook", {"Host": "tenant-a.example"}, URL_FIELD),  # port
        ("https://evil.example/hook", {"Host": "tenant-a.example"}, URL_FIELD),  # host
        ("https://api.example.com/other", {"Host": "tenant-a.example"}, URL_FIELD),  # path
        ("nonsense", {"Host": "tenant-a.example"}, URL_FIELD),
    ],
)
def test_another_place(url: str, headers: dict[str, str], field: str) -> None:
    assert moved(ENTERED, place_of(url, headers)) == field


def test_any_path_opens_the_paths_of_the_origin_only() -> None:
    assert (
        moved(ENTERED, place_of("https://api.example.com/other", {"Host": "tenant-a.example"}), any_path=True) is None
    )
    assert moved(ENTERED, place_of("https://api.example.com/other", {}), any_path=True) == HOST_FIELD
    assert (
        moved(ENTERED, place_of("https://evil.example/hook", {"Host": "tenant-a.example"}), any_path=True) == URL_FIELD
    )
    assert moved(None, ENTERED) == URL_FIELD
