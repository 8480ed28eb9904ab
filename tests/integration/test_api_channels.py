"""/api/channels through a real API: validation naming the field, scopes, write-only secrets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest

from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from tests.integration.api_client import Api, running_api

SMTP = {"host": "smtp.example.com", "port": 587, "user": "cronos", "password": "smtp-pa55-word",
        "from": "cronos@example.com", "to": ["ops@example.com"]}  # fmt: skip
SLACK = "https://hooks.slack.com/services/T000/B000/slack-s3cret"


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    # Loopback receivers stay refused here: the SSRF guard's checks are part of what is tested.
    async with running_api(msgspec.structs.replace(settings, http_allow_nets=())) as client:
        yield client


async def _create(api: Api, **fields: Any) -> dict[str, Any]:
    reply = await api.call("POST", "/api/channels", json=fields)
    assert reply.status == 201, reply.body
    return dict(reply.body)


BAD = [
    ({"name": "x", "kind": "webhook"}, "$.url"),
    ({"name": "x", "kind": "webhook", "url": "ftp://example.com/x"}, "$.url"),
    ({"name": "x", "kind": "webhook", "url": "http://10.1.2.3/hook"}, "$.url"),
    ({"name": "x", "kind": "webhook", "url": "http://localhost:9/hook"}, "$.url"),
    ({"name": "x", "kind": "webhook", "url": "https://example.com/h", "secret": "nope"}, "$.secret"),
    ({"name": "x", "kind": "email"}, "$.smtp"),
    ({"name": "x", "kind": "email", "smtp": {**SMTP, "host": "127.0.0.1"}}, "$.smtp.host"),
    ({"name": "x", "kind": "email", "smtp": {**SMTP, "to": ["not an address"]}}, "$.smtp.to[0]"),
    # Addresses no email can carry (every send would fail): a line break to Python, a decoded one.
    ({"name": "x", "kind": "email", "smtp": {**SMTP, "to": ["ops\u2028@example.com"]}}, "$.smtp.to[0]"),
    ({"name": "x", "kind": "email", "smtp": {**SMTP, "to": ["ok@example.com", "x@=?utf-8?q?a=0A?="]}},
     "$.smtp.to[1]"),
    ({"name": "x", "kind": "email", "smtp": {**SMTP, "from": "=?utf-8?q?=0D=0Abcc:_x?=@example.com"}}, "$.smtp.from"),
    ({"name": "x", "kind": "slack", "url": SLACK, "events": ["failed", "exploded"]}, "$.events[1]"),
    ({"name": "x", "kind": "slack", "url": SLACK, "after_failures": 0}, "$.after_failures"),
    ({"name": "x", "kind": "slack", "url": SLACK, "quiet_hours": {"start": "25:00", "end": "07:00"}},
     "$.quiet_hours.start"),
    ({"name": "x", "kind": "slack", "url": SLACK, "quiet_hours": {"start": "22:00", "end": "07:00",
                                                                 "timezone": "Mars/Olympus"}},
     "$.quiet_hours.timezone"),
    ({"name": "x", "kind": "slack", "url": SLACK, "colour": "red"}, "$.colour"),
    ({"name": "x", "kind": "slack", "url": "***"}, "$.url"),
    ({"name": "x", "kind": "slack", "url": SLACK, "selector": "team in ()"}, "$.selector"),
    ({"name": "x", "kind": "slack", "url": SLACK, "selector": "Team/x=1"}, "$.selector"),
]  # fmt: skip


async def test_bad_channels_are_refused_naming_the_field(api: Api) -> None:
    for body, field in BAD:  # one API for all (a start each is seconds)
        reply = await api.call("POST", "/api/channels", json=body)
        assert reply.status == 422, (body, reply.body)
        assert reply.body["field"] == field, (body, reply.body)


async def test_secrets_are_write_only_and_stars_keep_them(api: Api, pg_pool: asyncpg.Pool) -> None:
    hook = await _create(api, name="hook", kind="webhook", url="https://u:pw-123456@example.com/h?token=tok-98765")
    assert hook["url"] == "https://u:***@example.com/h?token=***" and hook["secret"] == "***"
    drawn = hook["webhook_secret"]
    chat = await _create(api, name="chat", kind="slack", url=SLACK)
    mail = await _create(api, name="mail", kind="email", smtp=SMTP)
    assert chat["url"] == "***" and mail["smtp"]["password"] == "***" and "webhook_secret" not in chat
    # *** sent back keeps the stored values; other fields change.
    reply = await api.call("PATCH", f"/api/channels/{mail['id']}", json={"smtp": mail["smtp"], "rate_limit_s": 60})
    assert reply.status == 200 and reply.body["rate_limit_s"] == 60, reply.body
    reply = await api.call("PATCH", f"/api/channels/{chat['id']}", json={"events": ["failed"]})
    assert reply.status == 200, reply.body
    # The Slack URL sent back as shown keeps it (it was refused as not a URL).
    reply = await api.call("PATCH", f"/api/channels/{chat['id']}", json={"url": "***", "events": ["failed"]})
    assert reply.status == 200 and reply.body["url"] == "***", reply.body
    reply = await api.call("PATCH", f"/api/channels/{hook['id']}", json={"url": hook["url"], "secret": "***"})
    assert reply.status == 200, reply.body
    stored = {r["name"]: r for r in await pg_pool.fetch("SELECT name, config, secrets FROM notification_channels")}
    assert stored["mail"]["secrets"] == {"password": SMTP["password"]}
    assert stored["chat"]["secrets"] == {"url": SLACK}
    assert stored["hook"]["secrets"] == {"secret": drawn}
    assert stored["hook"]["config"]["url"] == "https://u:pw-123456@example.com/h?token=tok-98765"
    # The password never follows a channel to another server.
    moved = {**mail["smtp"], "host": "smtp.elsewhere.example"}
    reply = await api.call("PATCH", f"/api/channels/{mail['id']}", json={"smtp": moved})
    assert reply.status == 422 and reply.body["field"] == "$.smtp.password", reply.body
    # The kind stays: the Slack URL never becomes a shown webhook URL.
    reply = await api.call("PATCH", f"/api/channels/{chat['id']}", json={"kind": "webhook"})
    assert reply.status == 422 and reply.body["field"] == "$.kind", reply.body
    shown = [await api.call("GET", "/api/channels"), *[await api.call("GET", f"/api/channels/{c['id']}")
                                                        for c in (hook, chat, mail)]]  # fmt: skip
    # The audit trail: three creations and the three changes that committed (the refused ones
    # left no entry), before and after with every secret ***.
    history = await api.call("GET", "/api/channels/history")
    assert history.status == 200, history.body
    entries = history.body["items"]
    assert [(e["action"], e["detail"]["name"]) for e in entries] == [
        ("updated", "hook"), ("updated", "chat"), ("updated", "chat"), ("updated", "mail"),
        ("created", "mail"), ("created", "chat"), ("created", "hook"),
    ]  # fmt: skip
    assert {e["actor"] for e in entries} == {"local"} and entries[0]["detail"]["channel_id"] == hook["id"]
    mail_change = entries[3]
    assert (mail_change["before"]["rate_limit_s"], mail_change["after"]["rate_limit_s"]) == (0, 60)
    assert mail_change["after"]["smtp"]["password"] == "***" and entries[5]["after"]["url"] == "***"
    assert entries[4]["before"] is None and entries[6]["after"]["secret"] == "***"
    for text in map(lambda r: str(r.body), [*shown, history]):
        for secret in (SMTP["password"], "slack-s3cret", drawn, "pw-123456", "tok-98765"):
            assert secret not in text
    audited = str([dict(r) for r in await pg_pool.fetch("SELECT before, after, detail FROM audit_log")])
    assert all(secret not in audited for secret in (SMTP["password"], "slack-s3cret", drawn, "pw-123456"))


async def test_scopes_names_and_deliveries(api: Api, pg_pool: asyncpg.Pool) -> None:
    _, admin = await TokenStore(pg_pool).create("boss", ["admin"], None, actor="cli")
    _, reader = await TokenStore(pg_pool).create("viewer", ["read"], None, actor="cli")
    _, writer = await TokenStore(pg_pool).create("ci", ["write"], None, actor="cli")
    api.token = admin
    chat = await _create(api, name="chat", kind="slack", url=SLACK)
    for token in (reader, writer):
        assert (await api.call("POST", "/api/channels", json={"name": "y", "kind": "slack", "url": SLACK},
                               token=token)).status == 403  # fmt: skip
        assert (await api.call("POST", f"/api/channels/{chat['id']}/test", token=token)).status == 403
        assert (await api.call("DELETE", f"/api/channels/{chat['id']}", token=token)).status == 403
    # A webhook URL whose path holds a token: an admin sees it, other readers where it goes.
    hook = await _create(api, name="hook", kind="webhook", url="https://hooks.example.com/T0/B0/path-t0ken?k=1")
    assert hook["url"] == "https://hooks.example.com/T0/B0/path-t0ken?k=1"
    for token in (reader, writer):
        listed = await api.call("GET", "/api/channels", token=token)
        assert listed.status == 200 and [c["name"] for c in listed.body["items"]] == ["chat", "hook"]
        one = await api.call("GET", f"/api/channels/{hook['id']}", token=token)
        assert listed.body["items"][1]["url"] == one.body["url"] == "https://hooks.example.com/***", one.body
    assert (await api.call("GET", f"/api/channels/{hook['id']}")).body["url"] == hook["url"]
    # An admin PATCHing with either form keeps the URL.
    for shown in (hook["url"], "https://hooks.example.com/***"):
        kept = await api.call("PATCH", f"/api/channels/{hook['id']}", json={"url": shown, "rate_limit_s": 5})
        assert kept.status == 200 and kept.body["url"] == hook["url"], kept.body
    assert (await api.call("DELETE", f"/api/channels/{hook['id']}")).status == 204
    again = await api.call("POST", "/api/channels", json={"name": "chat", "kind": "slack", "url": SLACK})
    assert again.status == 409, again.body
    for _ in range(3):
        assert (await api.call("POST", f"/api/channels/{chat['id']}/test")).status == 202
    ids = await api.walk(f"/api/channels/{chat['id']}/deliveries", 2)
    assert len(ids) == 3 and ids == sorted(ids, reverse=True)
    assert (await api.call("DELETE", f"/api/channels/{chat['id']}")).status == 204
    for token in (reader, writer):
        assert (await api.call("GET", "/api/channels/history", token=token)).status == 403
    entries = (await api.call("GET", "/api/channels/history")).body["items"]
    assert [(e["action"], e["actor"], e["detail"]["name"]) for e in entries] == [
        ("deleted", "boss", "chat"), ("deleted", "boss", "hook"), ("updated", "boss", "hook"),
        ("updated", "boss", "hook"), ("created", "boss", "hook"), ("created", "boss", "chat"),
    ]  # fmt: skip
    assert entries[0]["after"] is None and entries[0]["before"]["name"] == "chat"
    assert await api.walk("/api/channels/history", 1) == [e["id"] for e in entries]
    assert (await api.call("GET", f"/api/channels/{chat['id']}/deliveries")).status == 404
    assert await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries") == 0


async def test_a_selector_scopes_a_channel_and_is_checked(api: Api) -> None:
    labelled = await _create(api, name="data", kind="slack", url=SLACK, selector="team=data, env notin (dev)")
    assert labelled["selector"] == "team=data, env notin (dev)"
    patched = await api.call("PATCH", f"/api/channels/{labelled['id']}", json={"selector": "team"})
    assert patched.status == 200 and patched.body["selector"] == "team", patched.body
    bad = await api.call("PATCH", f"/api/channels/{labelled['id']}", json={"selector": "team in ()"})
    assert bad.status == 422 and bad.body["field"] == "$.selector", bad.body
    cleared = await api.call("PATCH", f"/api/channels/{labelled['id']}", json={"selector": None})
    assert cleared.status == 200 and cleared.body["selector"] is None, cleared.body
    assert (await api.call("DELETE", f"/api/channels/{labelled['id']}")).status == 204
