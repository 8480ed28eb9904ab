"""Trigger URLs of a job: created (secret shown once), listed, revoked, looked up by secret.

Statements here, not in cronos.store.queries, each written out. Only the secret's SHA-256 is kept
(cronos.store.tokens.token_hash); a signed trigger's key too, which an HMAC check needs. Creation
and revocation are audited on the job in their transaction.
"""

from __future__ import annotations

import hmac
from datetime import datetime

import asyncpg
import msgspec

from cronos.errors import NotFound
from cronos.store import audit
from cronos.store.db import to_struct, translate_errors
from cronos.store.tokens import check_name, token_hash
from cronos.trigger_hooks import new_secret

TRIGGER_INSERT = """
INSERT INTO job_triggers (job_id, name, secret_hash, signing_secret, admin, rate_per_minute, created_by)
SELECT id, $2, $3, $4, $5, $6, $7 FROM jobs WHERE id = $1
RETURNING id, job_id, name, signing_secret IS NOT NULL AS signed, admin, rate_per_minute, created_by,
          created_at, revoked_at
"""
TRIGGER_LIST = """
SELECT id, job_id, name, signing_secret IS NOT NULL AS signed, admin, rate_per_minute, created_by,
       created_at, revoked_at
FROM job_triggers
WHERE job_id = $1
ORDER BY id
"""
TRIGGER_REVOKE = """
UPDATE job_triggers
SET revoked_at = now()
WHERE job_id = $1 AND id = $2 AND revoked_at IS NULL
RETURNING id, job_id, name, signing_secret IS NOT NULL AS signed, admin, rate_per_minute, created_by,
          created_at, revoked_at
"""
# A live trigger by id: the hook's lookup (the secret's hash, or the signing key, is checked by the caller).
TRIGGER_LIVE = """
SELECT id, job_id, name, signing_secret IS NOT NULL AS signed, admin, rate_per_minute, created_by,
       created_at, revoked_at, secret_hash, signing_secret
FROM job_triggers
WHERE id = $1 AND revoked_at IS NULL
"""


class Trigger(msgspec.Struct, kw_only=True):
    """A trigger as it may be shown: never its secret nor its hash."""

    id: int
    job_id: int
    name: str
    signed: bool
    admin: bool  # made by an admin: it may start a shell job (api.shell_authority)
    rate_per_minute: int
    created_by: str
    created_at: datetime
    revoked_at: datetime | None


class Presented(msgspec.Struct, kw_only=True):
    """A live trigger and what authenticates a call to it."""

    trigger: Trigger
    secret_hash: bytes
    signing_secret: str | None

    def bearer_matches(self, text: str) -> bool:
        return self.signing_secret is None and hmac.compare_digest(self.secret_hash, token_hash(text))


def _view(trigger: Trigger) -> dict[str, object]:
    return {"trigger_id": trigger.id, "name": trigger.name, "signed": trigger.signed, "admin": trigger.admin,
            "rate_per_minute": trigger.rate_per_minute}  # fmt: skip


def _trigger(row: asyncpg.Record) -> Trigger:
    return to_struct({k: row[k] for k in Trigger.__struct_fields__}, Trigger)


class TriggerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._db = pool

    async def create(
        self, job_id: int, name: str, *, signed: bool, admin: bool, rate_per_minute: int, actor: str
    ) -> tuple[Trigger, str]:
        """A new trigger of the job and its secret (shown once). NotFound without the job."""
        name = check_name(name)
        secret = new_secret()
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(TRIGGER_INSERT, job_id, name, token_hash(secret),
                                          secret if signed else None, admin, rate_per_minute, actor)  # fmt: skip
                if row is None:
                    raise NotFound(f"job {job_id} not found")
                trigger = _trigger(row)
                await audit.record(conn, actor, "job", "trigger-created", job_id=job_id, detail=_view(trigger))
        return trigger, secret

    async def list_for(self, job_id: int) -> list[Trigger]:
        with translate_errors():
            rows = await self._db.fetch(TRIGGER_LIST, job_id)
        return [_trigger(row) for row in rows]

    async def revoke(self, job_id: int, trigger_id: int, *, actor: str) -> Trigger:
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(TRIGGER_REVOKE, job_id, trigger_id)
                if row is None:
                    raise NotFound(f"job {job_id} has no live trigger {trigger_id}")
                trigger = _trigger(row)
                await audit.record(conn, actor, "job", "trigger-revoked", job_id=job_id, detail=_view(trigger))
        return trigger

    async def live(self, trigger_id: int) -> Presented | None:
        with translate_errors():
            row = await self._db.fetchrow(TRIGGER_LIVE, trigger_id)
        if row is None:
            return None
        return Presented(trigger=_trigger(row), secret_hash=bytes(row["secret_hash"]),
                         signing_secret=row["signing_secret"])  # fmt: skip
