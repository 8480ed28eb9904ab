"""cronos/redact.py: secrets shown as ***, and a PATCH that sends *** back keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from cronos.errors import InvalidInput
from cronos.redact import (
    KIND_CHANGED,
    MIN_SCRUB_CHARS,
    NOTHING_STORED,
    SECRET,
    SECRETS_MOVED,
    TARGET_CHANGED,
    is_hidden,
    is_sensitive,
    redact_payload,
    redact_url,
    restore_secrets,
    scrub,
    secret_values,
    task_targets,
)


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
    assert restore_secrets("http", shown, HTTP, stored_kind="http") == HTTP
    changed = {**shown, "timeout_s": 5, "headers": {**shown["headers"], "authorization": SECRET}}
    del changed["headers"]["Authorization"]
    restored = restore_secrets("http", changed, HTTP, stored_kind="http")
    assert restored["timeout_s"] == 5
    assert restored["headers"]["authorization"] == "Bearer abc"  # header names are case-insensitive
    assert restored["url"] == HTTP["url"]
    # A new value replaces; another query on the same path keeps the user-info and query secret.
    moved = {**shown, "url": "https://bob:***@api.example.com/hook?token=***", "headers": {"Authorization": "new"}}
    restored = restore_secrets("http", moved, HTTP, stored_kind="http")
    assert restored["url"] == "https://bob:hunter2@api.example.com/hook?token=t0k"
    assert restored["headers"] == {"Authorization": "new"}
    # The method left out is the default (POST), as stored: the same target.
    no_method = {k: v for k, v in shown.items() if k != "method"}
    assert restore_secrets("http", no_method, HTTP, stored_kind="http")["headers"]["X-Api-Key"] == "k3y"
    # An empty path is "/"; scheme and host compare case-insensitively.
    root = {"url": "https://h.example", "headers": {"Authorization": "Bearer x"}}
    back = {"url": "HTTPS://H.example/", "headers": {"Authorization": SECRET}}
    assert restore_secrets("http", back, root, stored_kind="http")["headers"] == root["headers"]


def test_restore_shell_env_and_task_keys() -> None:
    stored = {"argv": ["x"], "env": {"API_TOKEN": "t", "Token": "other"}}
    restored = restore_secrets("shell", {"argv": ["y"], "env": {"API_TOKEN": SECRET}}, stored, stored_kind="shell")
    assert restored == {"argv": ["y"], "env": {"API_TOKEN": "t"}}
    task = {"action": "a", "opts": {"password": "p"}, "list": [{"key": "k"}]}
    assert restore_secrets("task", redact_payload("task", task), task, stored_kind="task") == task


HOOK = "https://api.example.com/hook"


@pytest.mark.parametrize(
    ("new", "field", "why"),
    [
        # Another target: stored secrets are not sent where the secret was not meant to go. The 422
        # names the field that moved them.
        ({"url": "https://evil.example/hook", "headers": {"Authorization": SECRET}}, "$.payload.url", SECRETS_MOVED),
        ({"url": "https://bob:***@evil.example/hook"}, "$.payload.url", SECRETS_MOVED),
        ({"url": "http://api.example.com/hook?token=***"}, "$.payload.url", SECRETS_MOVED),  # scheme
        ({"url": "https://api.example.com:8443/hook", "body": {"password": SECRET}}, "$.payload.url",
         SECRETS_MOVED),  # port
        ({"url": "https://bob:***@api.example.com/other"}, "$.payload.url", SECRETS_MOVED),  # path
        ({"url": "https://api.example.com?token=***"}, "$.payload.url", SECRETS_MOVED),  # path "" (/)
        ({"url": HOOK + "/", "headers": {"X-Trace": SECRET}}, "$.payload.url", SECRETS_MOVED),
        ({"url": HTTP["url"], "method": "DELETE", "headers": {"X-Api-Key": SECRET}}, "$.payload.method",
         SECRETS_MOVED),  # method
        # The Host header picks the virtual host (issue 36): adding, changing or removing it moves them.
        ({**redact_payload("http", HTTP), "headers": {"Authorization": SECRET, "Host": "tenant-b.example"}},
         "$.payload.headers.Host", SECRETS_MOVED),
        ({**redact_payload("http", HTTP), "body": {"password": SECRET}, "headers": {"host": "api.example.com:8443"}},
         "$.payload.headers.Host", SECRETS_MOVED),
        ({**redact_payload("http", HTTP), "secrets_follow_redirects": True}, "$.payload.secrets_follow_redirects",
         SECRETS_MOVED),  # lets them follow redirects to other paths
        # *** under a secret name that has nothing stored behind it.
        ({"url": HTTP["url"], "headers": {"X-New-Token": SECRET}}, "$.payload.headers.X-New-Token", NOTHING_STORED),
        ({"url": "https://api.example.com/hook?api_key=***"}, "$.payload.url", NOTHING_STORED),
    ],
)  # fmt: skip
def test_restore_refuses_a_secret_it_cannot_or_must_not_put_back(new: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        restore_secrets("http", new, HTTP, stored_kind="http")
    assert caught.value.field == field
    assert why in str(caught.value)
    assert "hunter2" not in str(caught.value) and "abc" not in str(caught.value)


def test_a_host_header_binds_the_secrets_and_re_entering_them_moves_it() -> None:
    hosted = {**HTTP, "headers": {**HTTP["headers"], "Host": "Tenant-A.example"}}
    shown = redact_payload("http", hosted)
    others = {k: v for k, v in shown["headers"].items() if k != "Host"}
    same = {**others, "HOST": "tenant-a.EXAMPLE"}  # names and values compare case-insensitively
    kept = restore_secrets("http", {**shown, "headers": same}, hosted, stored_kind="http")
    assert kept["headers"]["X-Api-Key"] == "k3y"
    for headers in (others, {**others, "Host": "b"}, {**others, "host": "b", "Host": "tenant-a.example"}):
        with pytest.raises(InvalidInput) as caught:
            restore_secrets("http", {**shown, "headers": headers}, hosted, stored_kind="http")
        assert caught.value.field == "$.payload.headers.Host"
    # Secrets sent anew, not as ***: nothing to restore, the new Host stands.
    entered = {**HTTP, "headers": {"Authorization": "Bearer new", "Host": "tenant-b.example"}}
    assert restore_secrets("http", entered, hosted, stored_kind="http") is entered


def test_restore_leaves_new_payloads_and_literal_stars_alone() -> None:
    new = {"url": "https://h/x", "headers": {"Accept": SECRET}}
    assert restore_secrets("http", new, HTTP, stored_kind="http") == new
    plain = {"url": "https://h/x"}
    assert restore_secrets("http", plain, HTTP, stored_kind="http") is plain
    with pytest.raises(InvalidInput):
        restore_secrets("shell", {"argv": ["x"], "env": {"PASSWORD": SECRET}}, {"argv": ["x"]}, stored_kind="shell")
    # A new payload of another kind with no *** in it is no business of restore_secrets.
    assert restore_secrets("task", {"action": "a", "password": "new"}, HTTP, stored_kind="http") == {
        "action": "a",
        "password": "new",
    }


# --- a change of kind: nothing is put back (issue 22, item 1) ---------------------------------

TASK = {"action": "sync", "url": "https://api.example.com/hook", "headers": {"Authorization": "Bearer abc"},
        "body": {"password": "pw"}, "env": {"API_TOKEN": "t0k3n"}}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "new", "stored_kind", "stored", "field"),
    [
        # The reported attack, both steps: http -> task with the attacker's URL, and task -> http.
        ("task", {**redact_payload("http", HTTP), "action": "x", "url": "http://attacker/"}, "http", HTTP,
         "$.payload.headers.Authorization"),
        ("task", {"action": "x", "url": "http://attacker/", "headers": {"X-Trace": SECRET}}, "http", HTTP,
         "$.payload.headers.X-Trace"),
        ("http", {"url": TASK["url"], "headers": {"Authorization": SECRET}}, "task", TASK,
         "$.payload.headers.Authorization"),  # the very same URL: still another kind
        ("http", {"url": TASK["url"], "headers": {"X-Hook": SECRET}}, "task",
         {**TASK, "headers": {"X-Hook": "Bearer x"}}, "$.payload.headers.X-Hook"),  # hidden by its value
        ("http", {"url": TASK["url"], "body": {"password": SECRET}}, "task", TASK, "$.payload.body.password"),
        ("shell", {"argv": ["x"], "env": {"API_TOKEN": SECRET}}, "task", TASK, "$.payload.env.API_TOKEN"),
        ("task", {"action": "x", "env": {"API_TOKEN": SECRET}}, "shell", {"argv": ["x"], "env": {"API_TOKEN": "t"}},
         "$.payload.env.API_TOKEN"),
    ],
)  # fmt: skip
def test_no_secret_survives_a_change_of_kind(
    kind: str, new: dict[str, Any], stored_kind: str, stored: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        restore_secrets(kind, new, stored, stored_kind=stored_kind)
    assert caught.value.field == field and KIND_CHANGED in str(caught.value)


# --- a task payload's target (issue 22, item 1) ----------------------------------------------


def test_task_targets_are_urls_and_target_keys_without_secrets() -> None:
    payload = {
        "action": "Sync",
        "callback": "https://u:pw@API.example.com/v1?page=2",
        "db": {"HOST": "DB.example.com", "port": 5432, "password": "pw"},
        "steps": [{"method": "post", "note": "not a url"}],
        "api_key": "https://secret.example/",  # a secret: not a target, it may be sent back as ***
    }
    assert task_targets(payload) == {
        "$.action": "sync",
        "$.callback": ("https", "api.example.com", "/v1"),
        "$.db.HOST": "db.example.com",
        "$.db.port": 5432,
        "$.steps[0].method": "post",
    }


@pytest.mark.parametrize(
    "change",
    [{"action": "dump"}, {"url": "https://evil.example/v1"}, {"url": "https://api.example.com/v2"},
     {"url": "https://api.example.com:444/v1"}, {"method": "GET"}, {"host": "evil.example"},
     {"extra": {"url": "https://evil.example/"}}],
)  # fmt: skip
def test_a_task_secret_stays_with_its_target(change: dict[str, Any]) -> None:
    stored = {"action": "sync", "url": "https://api.example.com/v1", "method": "POST", "host": "db", "password": "pw"}
    with pytest.raises(InvalidInput) as caught:
        restore_secrets("task", {**stored, **change, "password": SECRET}, stored, stored_kind="task")
    assert caught.value.field == "$.payload.password" and TARGET_CHANGED in str(caught.value)
    # Anything else may change; so may the query of a URL.
    kept = {**stored, "password": SECRET, "url": "https://API.example.com/v1?page=3", "batch": 5}
    assert restore_secrets("task", kept, stored, stored_kind="task")["password"] == "pw"


# --- scrubbing known secret values (issue 22, item 10) ---------------------------------------


def test_secret_values_of_every_kind() -> None:
    http = secret_values("http", HTTP)
    for value in ("hunter2", "Bearer abc", "Bearer def"):
        assert value in http
    assert "t0k" not in http and "k3y" not in http and "pw" not in http  # shorter than MIN_SCRUB_CHARS
    assert MIN_SCRUB_CHARS == 4 and "bob" not in http  # a user name beside a password is not secret
    long_http = {"url": "https://x:p%40ss@h/?api_key=k%2Fey&page=1234", "headers": {"X-Hook": "Bearer tok-1234"},
                 "body": {"nested": [{"secret": {"pin": 123456, "ok": True}}]}}  # fmt: skip
    values = secret_values("http", long_http)
    for value in ("p%40ss", "p@ss", "k%2Fey", "k/ey", "Bearer tok-1234", "tok-1234", "123456"):
        assert value in values, value
    assert "1234" not in values and "True" not in values
    shell = {"argv": ["x"], "env": {"DB_PASSWORD": 'q"uo\\te', "REGION": "eu-west-1"}}
    # As is, JSON-escaped, JSON-escaped twice (a JSON body echoed in a JSON reply), repr-escaped.
    assert set(secret_values("shell", shell)) == {'q"uo\\te', 'q\\"uo\\\\te', 'q\\\\\\"uo\\\\\\\\te', 'q"uo\\\\te'}
    task = {"action": "sync", "password": "héllo-wörld", "opts": {"token": ["abcd", "efgh"]}, "user": "alice"}
    assert {"héllo-wörld", "h\\u00e9llo-w\\u00f6rld", "abcd", "efgh"} <= set(secret_values("task", task))
    assert "alice" not in secret_values("task", task) and "sync" not in secret_values("task", task)
    assert secret_values("task", {"action": "x"}) == ()


def test_scrub_replaces_every_form_longest_first() -> None:
    values = secret_values("task", {"action": "x", "password": "s3cr3t-pw", "token": "s3cr3t"})
    assert values[0] == "s3cr3t-pw"  # longest first: the longer value is not left half-scrubbed
    text = "ValueError: login failed for s3cr3t-pw (token s3cr3t)"
    assert scrub(text, values) == "ValueError: login failed for *** (token ***)"
    quoted = secret_values("task", {"action": "x", "password": 'a"b\\c-d'})
    assert scrub('{"password":"a\\"b\\\\c-d"}', quoted) == '{"password":"***"}'  # JSON text
    assert scrub("{'password': 'a\"b\\\\c-d'}", quoted) == "{'password': '***'}"  # repr
    assert scrub("nothing here", values) == "nothing here" and scrub("x", ()) == "x"


def test_is_hidden_by_name_or_value() -> None:
    assert is_hidden("Authorization", "x") and is_hidden("X-Hook", "Bearer abc") and is_hidden("X-Hook", "basic abc")
    assert not is_hidden("X-Hook", "hello") and not is_hidden("Accept", "application/json")
