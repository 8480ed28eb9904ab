"""API tokens: drawn, hashed, stored, looked up, listed and revoked.

A token is `cronos_` + base64url of 32 random bytes (256 bits), shown once at creation and
stored only as its SHA-256: a database dump lets nobody call the API. Lookups hash the
presented text and compare in constant time; nothing is cached, so a revocation holds at
once on every API replica. Each creation and revocation is audited in its transaction.

Protected mode (loopback clients act as admin while no token exists) fails closed: the first
token's creation closes it in its own transaction, and only the operator reopens it
(`reopen_local`, audited); a last token expiring or revoked does not.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime

import asyncpg
import msgspec

from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.scopes import SCOPES
from cronos.store import audit
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import access as access_q
from cronos.store.timestamps import unusable_row

PREFIX = "cronos_"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
REOPENED = "protected-mode-reopened"  # the audit action of reopen_local
NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"


def new_token() -> str:
    return PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def check_name(name: str, field: str = "$.name") -> str:
    if not NAME_RE.fullmatch(name):
        raise InvalidInput(field, f"must be {NAME_RULE}")
    if name in audit.RESERVED_ACTORS:
        raise InvalidInput(field, f"{name!r} is reserved (it names an actor in the audit trail)")
    return name


def check_scopes(scopes: Iterable[str], field: str = "$.scopes") -> list[str]:
    given = list(dict.fromkeys(scopes))
    if not given:
        raise InvalidInput(field, f"at least one of {', '.join(SCOPES)}")
    for scope in given:
        if scope not in SCOPES:
            raise InvalidInput(field, f"unknown scope {scope!r}; one of {', '.join(SCOPES)}")
    return sorted(given, key=SCOPES.index)


class TokenInfo(msgspec.Struct, kw_only=True):
    """A token as it may be shown: never its text nor its hash."""

    id: int
    name: str
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


class Refusal(enum.Enum):
    """Why a presented token does not authenticate (said in the 401 detail)."""

    UNKNOWN = "unknown token"
    REVOKED = "token revoked"
    EXPIRED = "token expired"
    UNUSABLE = "token's expires_at is outside the range Cronos uses: create another token"


def _audit_view(token: TokenInfo) -> dict[str, object]:
    return {"name": token.name, "scopes": token.scopes, "expires_at": token.expires_at}


class TokenStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._db = pool

    async def create(
        self, name: str, scopes: Iterable[str], expires_at: datetime | None, *, actor: str
    ) -> tuple[TokenInfo, str]:
        """A new token and its text (shown once). Conflict when a live token has this name."""
        name, wanted = check_name(name), check_scopes(scopes)
        text = new_token()
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                try:
                    row = await conn.fetchrow(access_q.TOKEN_INSERT, name, token_hash(text), wanted, expires_at)
                except asyncpg.UniqueViolationError as exc:
                    raise Conflict(f"a token named {name!r} already exists") from exc
                info = to_struct(row, TokenInfo)
                await conn.execute(access_q.PROTECTED_MODE_CLOSE)
                after = msgspec.to_builtins(_audit_view(info))
                await audit.record(conn, actor, "token", "created", token_name=name, after=after)
        return info, text

    async def revoke(self, name: str, *, actor: str) -> TokenInfo:
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(access_q.TOKEN_REVOKE, name)
                if row is None:
                    raise NotFound(f"no token named {name!r}")
                info = to_struct(row, TokenInfo)
                before = msgspec.to_builtins(_audit_view(info))
                await audit.record(conn, actor, "token", "revoked", token_name=name, before=before)
        return info

    async def list_tokens(self) -> list[TokenInfo]:
        with translate_errors():
            rows = await self._db.fetch(access_q.TOKEN_LIST)
        return [to_struct(row, TokenInfo) for row in rows]

    async def authenticate(self, text: str) -> TokenInfo | Refusal:
        """The live token whose text this is, or why not; last_used_at moves at most once a minute."""
        digest = token_hash(text)
        with translate_errors():
            row = await self._db.fetchrow(access_q.TOKEN_BY_HASH, digest)
            if row is None or not hmac.compare_digest(bytes(row["token_hash"]), digest):
                return Refusal.UNKNOWN
            if row["revoked_at"] is not None:
                return Refusal.REVOKED
            if unusable_row(row, ("expires_at",), "tokens"):  # an older version's infinity: fail closed
                return Refusal.UNUSABLE
            if row["expires_at"] is not None and row["expires_at"] <= row["now"]:
                return Refusal.EXPIRED
            info = to_struct({k: row[k] for k in TokenInfo.__struct_fields__}, TokenInfo)
            last = info.last_used_at
            if last is None or (row["now"] - last).total_seconds() >= 60:
                await self._db.execute(access_q.TOKEN_TOUCH, info.id)
        return info

    async def local_admin_open(self) -> bool:
        """Protected mode holds: never closed by a token (or reopened), and no token usable."""
        with translate_errors():
            return bool(await self._db.fetchval(access_q.TOKEN_LOCAL_ADMIN_OPEN))

    async def reopen_local(self, *, actor: str) -> bool:
        """The operator's explicit return to protected mode; False when it was not closed.
        Conflict while a token is usable (it would keep loopback clients out until it ends,
        then open by itself: the very thing this refuses)."""
        with translate_errors():
            async with self._db.acquire() as conn, conn.transaction():
                await conn.execute(access_q.PROTECTED_MODE_LOCK)
                if await conn.fetchval(access_q.TOKEN_USABLE_EXISTS):
                    raise Conflict("usable tokens exist: revoke them first (`cronos token list`, `... revoke NAME`)")
                reopened = bool(await conn.fetchval(access_q.PROTECTED_MODE_REOPEN))
                if reopened:
                    await audit.record(conn, actor, "token", REOPENED)
        return reopened
