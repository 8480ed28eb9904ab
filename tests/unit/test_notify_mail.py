"""cronos.notify.mail and the channel URL a non-admin sees: pure, no server."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes
from email import policy as email_policy

import pytest

from cronos.notify import mail
from cronos.notify.channels import masked_url

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "name",
    ["=?utf-8?q?x=0D=0AReply-To:_a@b.example?=", "a\u2028b\u2029c", "x\u0085y", "tab\there", "=?utf-8?b?DQpYOiB5?="],
)
def test_no_name_adds_a_header_or_fails_the_email(name: str) -> None:
    email = mail.build(subject=f"[Cronos] {name} failed", body=f"{name}\n", sender="c@alerts.example.com",
                       to=["ops@example.com"], now=NOW, msg_id="<x.1@alerts.example.com>")  # fmt: skip
    read = message_from_bytes(email.as_bytes(), policy=email_policy.default)
    assert list(read.keys())[:5] == ["Subject", "From", "To", "Date", "Message-ID"] and len(read.keys()) == 8
    assert "\n" not in str(read["Subject"]) and "=?" not in str(read["Subject"])
    assert read["Date"] == "Wed, 02 Jan 2030 03:04:05 +0000"


def test_addresses_an_email_cannot_carry_are_named() -> None:
    for fine in ("ops@example.com", "a.b+c@x.y", "josé@example.com", "a@[192.0.2.1]"):
        assert mail.address_problem(fine) is None, fine
    for bad in ("ops\u2028@example.com", "x@=?utf-8?q?a=0A?=", "=?utf-8?q?=0D=0Abcc:_x?=@example.com", "a(b)@c.d"):
        assert mail.address_problem(bad) is not None, bad


def test_a_message_id_is_the_same_on_every_try_and_differs_by_message() -> None:
    one = mail.message_id(7, {"event": {"id": 1}}, "cronos@exämple.com")
    assert one == mail.message_id(7, {"event": {"id": 1}}, "cronos@exämple.com")
    assert one.endswith("@xn--exmple-cua.com>") and one.startswith("<cronos.notification.7.")
    assert one != mail.message_id(7, {"event": {"id": 2}}, "cronos@exämple.com")


def test_a_webhook_url_shows_where_it_goes_not_its_token() -> None:
    assert masked_url("https://u:pw@hooks.example.com:8443/T0/B0/tok?key=1#f") == "https://hooks.example.com:8443/***"
    assert masked_url("http://[::1]:9/x") == "http://[::1]:9/***"
    assert masked_url("https://hooks.example.com") == "https://hooks.example.com"
    assert masked_url("https://hooks.example.com/?k=v") == "https://hooks.example.com/***"
