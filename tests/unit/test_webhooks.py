"""executor/webhooks.py: signatures verified by `standardwebhooks`, the specification's own library."""

from __future__ import annotations

import base64
import os
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from executor.webhooks import message_id, sign, signature_headers

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
BODY = b'{"event": "tick", "n": 1}'


def _headers(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return signature_headers(secret, "msg_7_1893456000000", int(time.time()), body)


def test_standardwebhooks_verifies_the_signature() -> None:
    assert Webhook(SECRET).verify(BODY, _headers()) == {"event": "tick", "n": 1}


def test_empty_body_of_a_get_verifies() -> None:
    Webhook(SECRET).verify(b"", _headers(b""), json_parse=False)


def test_wrong_secret_fails_verification() -> None:
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(other).verify(BODY, _headers())


def test_tampered_body_fails_verification() -> None:
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(SECRET).verify(BODY.replace(b"1", b"2"), _headers())


def test_tampered_id_or_timestamp_fails_verification() -> None:
    headers = _headers()
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(BODY, {**headers, "webhook-id": "msg_8_1893456000000"})
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(BODY, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 1)})


def test_sign_matches_the_reference_signer() -> None:
    stamp = 1_700_000_000
    expected = Webhook(SECRET).sign("msg_1_2", datetime.fromtimestamp(stamp, UTC), BODY.decode())
    assert sign(SECRET, "msg_1_2", stamp, BODY) == expected
    assert sign(SECRET, "msg_1_2", stamp, BODY).startswith("v1,")


def test_message_id_is_one_per_tick() -> None:
    tick = datetime(2030, 1, 1, tzinfo=UTC)
    assert message_id(7, tick) == "msg_7_1893456000000"
    assert message_id(7, tick) != message_id(8, tick)
    assert "." not in message_id(7, tick)
