"""Console sessions of people signed in with OpenID Connect, and the sign-ins under way.

A session id is 256 random bits, handed to the browser once (its HttpOnly cookie) and stored only
as its SHA-256, as API tokens are. Every request looks its session up (no cache), so a sign-out
holds at once on every API replica. A sign-in under way keeps its state (hashed), nonce and PKCE
verifier here between the redirect to the provider and the callback, which takes it once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime

import asyncpg
import msgspec

from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import access as access_q

LOGIN_TTL_S = 600.0  # a sign-in left at the provider longer than this must start again


class Session(msgspec.Struct, kw_only=True, frozen=True):
    actor: str  # in the audit trail: oidc:<email or subject>
    subject: str
    scopes: list[str]
    groups: list[str]
    created_at: datetime
    expires_at: datetime


class PendingLogin(msgspec.Struct, kw_only=True, frozen=True):
    nonce: str
    code_verifier: str


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class SessionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._db = pool

    async def begin_login(self, state: str, nonce: str, code_verifier: str) -> None:
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                await conn.execute(access_q.LOGINS_EXPIRED_DELETE)
                await conn.execute(access_q.LOGIN_INSERT, digest(state), nonce, code_verifier, LOGIN_TTL_S)

    async def take_login(self, state: str) -> PendingLogin | None:
        """The sign-in this state began, once; None when unknown, already taken or expired."""
        with translate_errors():
            row = await self._db.fetchrow(access_q.LOGIN_TAKE, digest(state))
        if row is None or not row["live"]:
            return None
        return PendingLogin(nonce=row["nonce"], code_verifier=row["code_verifier"])

    async def create(
        self, *, actor: str, subject: str, scopes: Iterable[str], groups: Iterable[str], lifetime_s: float
    ) -> str:
        """A new session; its id (the cookie's value) is returned here only."""
        session_id = new_secret()
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                await conn.execute(access_q.SESSIONS_EXPIRED_DELETE)
                await conn.execute(
                    access_q.SESSION_INSERT, digest(session_id), actor, subject, list(scopes), list(groups), lifetime_s
                )
        return session_id

    async def lookup(self, session_id: str) -> Session | None:
        """The live session of this id, or None (unknown, signed out, expired)."""
        with translate_errors():
            row = await self._db.fetchrow(access_q.SESSION_BY_HASH, digest(session_id))
        return None if row is None else to_struct({k: row[k] for k in Session.__struct_fields__}, Session)

    async def end(self, session_id: str) -> str | None:
        """Sign out: the session's actor, or None when there was none."""
        with translate_errors():
            return await self._db.fetchval(access_q.SESSION_DELETE, digest(session_id))  # type: ignore[no-any-return]
