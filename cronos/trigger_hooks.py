"""Trigger URLs (issue 40, item 7): the rules a call to `POST /hooks/{id}` is checked by.

Pure: no I/O, the clock is a parameter. A trigger's secret is `whsec_` + base64 of 32 random bytes:
an unsigned trigger takes it as `Authorization: Bearer <secret>` (never in the URL, which proxies
log); a signed one takes no secret at all but the Standard Webhooks headers, keyed with it
(cronos.webhooks signs with the same function): the body cannot be changed nor the call replayed.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Mapping

from cronos.webhooks import SECRET_PREFIX, sign

TOLERANCE_S = 300  # a signed call's webhook-timestamp may be this far from now (the specification's 5 minutes)
WINDOW_S = 60  # the rate limit's window: rate_per_minute calls in each
MAX_ID_LEN = 256


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signature_refusal(secret: str, headers: Mapping[str, str], body: bytes, now_s: float) -> str | None:
    """Why a signed call is refused (None: it is signed with `secret`, within the tolerance)."""
    msg_id, stamp, given = (headers.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not stamp or not given:
        return "a signed trigger needs the webhook-id, webhook-timestamp and webhook-signature headers"
    if len(msg_id) > MAX_ID_LEN:
        return f"webhook-id is longer than {MAX_ID_LEN} characters"
    if not stamp.isascii() or not stamp.isdigit():
        return "webhook-timestamp must be unix seconds"
    if abs(now_s - int(stamp)) > TOLERANCE_S:
        return f"webhook-timestamp is more than {TOLERANCE_S} s from the server's clock"
    expected = sign(secret, msg_id, int(stamp), body)
    # The header may carry several space-separated signatures (key rotation): one must match.
    if not any(hmac.compare_digest(expected, one) for one in given.split()):
        return "webhook-signature does not match the body"
    return None


def window(now_s: float) -> tuple[int, int]:
    """The rate window `now_s` falls in, and the whole seconds until the next one (Retry-After)."""
    index = int(now_s // WINDOW_S)
    return index, max(1, int((index + 1) * WINDOW_S - now_s + 0.999))
