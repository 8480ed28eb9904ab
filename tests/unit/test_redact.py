"""cronos/redact.py: secrets shown as ***, and a PATCH that sends *** back keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from cronos.errors import InvalidInput
from cronos.redact import SECRET, is_sensitive, redact_payload, redact_url, restore_secrets


@pytest.mark.parametrize(
    "name",
    ["Authorization", "cookie", "Proxy-Authorization", "Set-Cookie", "X-Api-Key", "X-Auth-Token", "client_secret",
     "DB_PASSWORD", "passwd", "SESSION_ID"],
)  # fmt: skip
def test_sensitive_names(name: str) -> None:
    assert is_sensitive(name)


@pytest.mark.parametrize("name", ["Content-Type", "Accept", "X-Request-Id", "User-Agent", "HOME", "LANG"])
def test_ordinary_names(name: str) -> None:
    assert not is_sensitive(name)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/a?b=1", "https://example.com/a?b=1"),
        ("https://user:pw@example.com/a", "https://user:***@example.com/a"),
        ("https://ghp_abc@example.com/", "https://***@example.com/"),
        ("https://h/p?token=abc&page=2", "https://h/p?token=***&page=2"),
        ("https://h/p?api_key=a%20b&API_KEY=c&x", "https://h/p?api_key=***&API_KEY=***&x"),
        ("https://h/p?next=Bearer%20abc", "https://h/p?next=***"),
        ("https://u:p@h:8443/p?password=x#frag", "https://u:***@h:8443/p?password=***#frag"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_url_leaves_an_unparseable_url_with_no_secret() -> None:
    assert redact_url("http://[::1") == "http://[::1"
    assert redact_url("http://[::1@x") == SECRET


HTTP = {
    "url": "https://bob:hunter2@api.example.com/hook?token=t0k&page=1",
    "method": "POST",
    "headers": {"Authorization": "Bearer abc", "X-Trace": "Bearer def", "Accept": "application/json",
                "X-Api-Key": "k3y"},
    "body": {"user": "bob", "password": "pw", "nested": [{"secret": "s"}]},
}  # fmt: skip


def test_redact_http_payload() -> None:
    shown = redact_payload("http", HTTP)
    assert shown == {
        "url": "https://bob:***@api.example.com/hook?token=***&page=1",
        "method": "POST",
        "headers": {"Authorization": SECRET, "X-Trace": SECRET, "Accept": "application/json", "X-Api-Key": SECRET},
        "body": {"user": "bob", "password": SECRET, "nested": [{"secret": SECRET}]},
    }
    assert HTTP["headers"]["Authorization"] == "Bearer abc"  # a copy: the stored payload is untouched


def test_redact_shell_and_task_payloads() -> None:
    shell = {"argv": ["backup"], "env": {"AWS_SECRET_ACCESS_KEY": "s", "REGION": "eu", "AUTH": "Basic x"}}
    assert redact_payload("shell", shell) == {
        "argv": ["backup"],
        "env": {"AWS_SECRET_ACCESS_KEY": SECRET, "REGION": "eu", "AUTH": SECRET},
    }
    task = {"action": "sync", "api_token": "t", "opts": {"password": "p", "n": 3}, "none_key": None}
    assert redact_payload("task", task) == {
        "action": "sync",
        "api_token": SECRET,
        "opts": {"password": SECRET, "n": 3},
        "none_key": None,
    }


def test_restore_keeps_stored_secrets_sent_back_as_shown() -> None:
    shown = redact_payload("http", HTTP)
    assert restore_secrets("http", shown, HTTP) == HTTP
    changed = {**shown, "method": "PUT", "headers": {**shown["headers"], "authorization": SECRET}}
    del changed["headers"]["Authorization"]
    restored = restore_secrets("http", changed, HTTP)
    assert restored["method"] == "PUT"
    assert restored["headers"]["authorization"] == "Bearer abc"  # header names are case-insensitive
    assert restored["url"] == HTTP["url"]
    # A new value replaces; a path change on the same origin keeps the user-info and query secret.
    moved = {**shown, "url": "https://bob:***@api.example.com/other?token=***", "headers": {"Authorization": "new"}}
    restored = restore_secrets("http", moved, HTTP)
    assert restored["url"] == "https://bob:hunter2@api.example.com/other?token=t0k"
    assert restored["headers"] == {"Authorization": "new"}


def test_restore_shell_env_and_task_keys() -> None:
    stored = {"argv": ["x"], "env": {"API_TOKEN": "t", "Token": "other"}}
    restored = restore_secrets("shell", {"argv": ["y"], "env": {"API_TOKEN": SECRET}}, stored)
    assert restored == {"argv": ["y"], "env": {"API_TOKEN": "t"}}
    task = {"action": "a", "opts": {"password": "p"}, "list": [{"key": "k"}]}
    assert restore_secrets("task", redact_payload("task", task), task) == task


@pytest.mark.parametrize(
    ("new", "field"),
    [
        # Another host: stored secrets are not sent to a target the secret was not meant for.
        ({"url": "https://evil.example/hook", "headers": {"Authorization": SECRET}}, "$.payload.headers.Authorization"),
        ({"url": "https://bob:***@evil.example/hook"}, "$.payload.url"),
        ({"url": "http://api.example.com/hook?token=***"}, "$.payload.url"),  # scheme changed
        ({"url": "https://api.example.com:8443/hook", "body": {"password": SECRET}}, "$.payload.body.password"),
        # *** under a secret name that has nothing stored behind it.
        ({"url": HTTP["url"], "headers": {"X-New-Token": SECRET}}, "$.payload.headers.X-New-Token"),
        ({"url": "https://api.example.com/hook?api_key=***"}, "$.payload.url"),
    ],
)
def test_restore_refuses_a_secret_it_cannot_or_must_not_put_back(new: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        restore_secrets("http", new, HTTP)
    assert caught.value.field == field
    assert "hunter2" not in str(caught.value) and "abc" not in str(caught.value)


def test_restore_leaves_new_payloads_and_literal_stars_alone() -> None:
    new = {"url": "https://h/x", "headers": {"Accept": SECRET}}
    assert restore_secrets("http", new, HTTP) == new
    plain = {"url": "https://h/x"}
    assert restore_secrets("http", plain, HTTP) is plain
    with pytest.raises(InvalidInput):
        restore_secrets("shell", {"argv": ["x"], "env": {"PASSWORD": SECRET}}, {"argv": ["x"]})
