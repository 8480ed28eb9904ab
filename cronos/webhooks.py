"""Signed webhooks per the Standard Webhooks specification (https://www.standardwebhooks.com): http
runs and notification webhooks.

Pure: no I/O. Every http run request carries

    webhook-id:        msg_<job id>_<scheduled_for, unix ms> -- one per tick: the same for every
                       attempt (a retry re-sends the same message, as the specification asks),
                       every re-delivery of a run and every redirect hop on the job's own origin
                       (a hop to another origin is not signed: executor.kinds.http); a receiver
                       that keeps the ids it handled skips duplicates (the same tick as
                       Idempotency-Key)
    webhook-timestamp: unix seconds when this request was sent
    webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>." + the exact body bytes>

keyed with the job's secret (`whsec_` + base64 of 32 random bytes, drawn by PostgreSQL).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime

SECRET_PREFIX = "whsec_"


def _key(secret: str) -> bytes:
    # "==" tolerates unpadded base64 (surplus padding is ignored), as the reference libraries do.
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX) + "==")


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256>` over f"{msg_id}.{timestamp}." + body, keyed with the decoded secret."""
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def message_id(job_id: int, scheduled_for: datetime) -> str:
    """The tick's message id: no `.` (the signed content is dot-separated) and no secret in it."""
    return f"msg_{job_id}_{round(scheduled_for.timestamp() * 1000)}"


def signature_headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
