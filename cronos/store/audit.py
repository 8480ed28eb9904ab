"""The audit trail: who changed which job, token or notification channel, when, and its fields before and after.

An entry is written by `record` inside the transaction of the change it describes, so
there is never a change without its entry nor an entry for a change that rolled back.
Job snapshots pass through cronos.redact first, channels through cronos.notify.channels.shown:
no secret value is ever stored here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg
import msgspec

from cronos.models import JOB_WRITABLE, Job
from cronos.redact import redact_payload
from cronos.store.db import PageBounds, job_page, to_struct, translate_errors
from cronos.store.queries import access as access_q

Subject = Literal["job", "token", "channel", "calendar", "blackout", "namespace"]
# Actors that are not a token's name: protected mode's loopback client, CRONOS_ADMIN_TOKEN,
# the `cronos token` command, and store calls made outside the API (tests, tools).
LOCAL = "local"
ADMIN_TOKEN = "admin-token"
CLI = "cli"
SYSTEM = "system"
RESERVED_ACTORS = frozenset({LOCAL, ADMIN_TOKEN, CLI, SYSTEM})

# The job fields a snapshot keeps: what a client can set, plus its id.
_SNAPSHOT = ("id", *JOB_WRITABLE)


class AuditFields(msgspec.Struct, kw_only=True):
    """An entry but for its subject (which the API's routes imply): what the API shows of it."""

    id: int
    at: datetime
    actor: str
    action: str
    job_id: int | None
    token_name: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    detail: dict[str, Any] | None


class AuditEntry(AuditFields, kw_only=True):
    subject: Subject


def snapshot(job: Job) -> dict[str, Any]:
    """The job as the audit keeps it: its settable fields, secrets replaced by `***`."""
    fields = {name: getattr(job, name) for name in _SNAPSHOT}
    fields["payload"] = redact_payload(job.kind, job.payload)
    return fields


async def record(
    conn: asyncpg.Connection,
    actor: str,
    subject: Subject,
    action: str,
    *,
    job_id: int | None = None,
    token_name: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """One entry, on `conn` (in the caller's transaction)."""
    await conn.execute(access_q.AUDIT_INSERT, actor, subject, action, job_id, token_name, before, after, detail)


class AuditStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def job_history(
        self, job_id: int, before_id: int | None, limit: int, bounds: PageBounds
    ) -> tuple[list[AuditEntry], bool]:
        """A job's entries, newest first, large values summarised, and whether the page ended
        early at `bounds.page_bytes`; NotFound only for an id that never was a job (a deleted job
        keeps its history)."""
        return await job_page(
            self._pool, AuditEntry, access_q.AUDIT_OF_JOB, access_q.AUDIT_JOB_KNOWN, job_id, before_id, limit, bounds
        )

    async def history(self, subject: Subject, before_id: int | None, limit: int) -> list[AuditEntry]:
        with translate_errors():
            rows = await self._pool.fetch(access_q.AUDIT_OF_SUBJECT, subject, before_id, limit)
        return [to_struct(row, AuditEntry) for row in rows]
