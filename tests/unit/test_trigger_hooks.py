"""cronos/trigger_hooks.py: a signed trigger call's checks and the rate window."""

from __future__ import annotations

from cronos import trigger_hooks, webhooks

NOW = 1_800_000_000
BODY = b'{"payload": {"ref": "main"}}'


def _headers(secret: str, body: bytes = BODY, at: int = NOW, msg_id: str = "msg_1") -> dict[str, str]:
    return webhooks.signature_headers(secret, msg_id, at, body)


def test_a_call_signed_with_the_secret_passes() -> None:
    secret = trigger_hooks.new_secret()
    assert secret.startswith("whsec_") and secret != trigger_hooks.new_secret()
    assert trigger_hooks.signature_refusal(secret, _headers(secret), BODY, NOW + 10) is None
    # Several signatures (the sender rotating keys): one matching is enough.
    rotated = _headers(secret)
    rotated["webhook-signature"] = (
        f"{_headers(trigger_hooks.new_secret())['webhook-signature']} {rotated['webhook-signature']}"
    )
    assert trigger_hooks.signature_refusal(secret, rotated, BODY, NOW) is None


def test_refusals_say_why() -> None:
    secret, other = trigger_hooks.new_secret(), trigger_hooks.new_secret()
    refusal = trigger_hooks.signature_refusal
    assert "does not match" in (refusal(secret, _headers(other), BODY, NOW) or "")
    assert "does not match" in (refusal(secret, _headers(secret), BODY + b" ", NOW) or "")
    assert "server's clock" in (refusal(secret, _headers(secret, at=NOW - 301), BODY, NOW) or "")
    assert "server's clock" in (refusal(secret, _headers(secret, at=NOW + 301), BODY, NOW) or "")
    assert "needs the webhook-id" in (refusal(secret, {}, BODY, NOW) or "")
    bad_stamp = {**_headers(secret), "webhook-timestamp": "soon"}
    assert "unix seconds" in (refusal(secret, bad_stamp, BODY, NOW) or "")
    long_id = _headers(secret, msg_id="m" * 300)
    assert "longer than" in (refusal(secret, long_id, BODY, NOW) or "")


def test_the_window_and_its_retry_after() -> None:
    assert trigger_hooks.window(120.0) == (2, 60)
    assert trigger_hooks.window(179.2) == (2, 1)
    assert trigger_hooks.window(150.5) == (2, 30)
