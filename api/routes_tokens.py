"""/api/tokens (admin): create (the token shown once), list, revoke, and their audit trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
from aiohttp import web

from api.auth import principal_of
from api.bodies import decode, decode_cursor, encode_cursor, query_limit, respond
from api.routing import BODY_ERRORS, DB_ERRORS, PAGE, Route
from api.schemas_tokens import AuditList, AuditOut, TokenCreate, TokenCreated, TokenList, TokenOut
from api.state import BACKENDS
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.store.audit import AuditEntry, AuditStore
from cronos.store.tokens import TokenInfo, TokenStore


def token_out(token: TokenInfo) -> TokenOut:
    """The token's fields that TokenOut names (not its id, nor when it was revoked)."""
    return msgspec.convert(token, TokenOut, from_attributes=True)


def audit_out(entry: AuditEntry) -> AuditOut:
    fields = msgspec.structs.asdict(entry)
    del fields["subject"]
    return AuditOut(**fields)


def audit_page(entries: list[AuditEntry], limit: int, *, cut: bool = False) -> AuditList:
    """A page with its cursor: when it is full, or `cut` short at the byte bound."""
    cursor = encode_cursor(entries[-1].id) if entries and (cut or len(entries) == limit) else None
    return AuditList(items=[audit_out(e) for e in entries], next_cursor=cursor)


def _expiry(body: TokenCreate, now: datetime) -> datetime | None:
    if body.expires_in_s is not msgspec.UNSET and body.expires_at is not msgspec.UNSET:
        raise InvalidInput("$.expires_at", "give expires_in_s or expires_at, not both")
    if body.expires_in_s is not msgspec.UNSET:
        return now + timedelta(seconds=body.expires_in_s)
    if body.expires_at is not msgspec.UNSET:
        at = body.expires_at
        if at.tzinfo is None:
            raise InvalidInput("$.expires_at", "must carry a time zone offset (e.g. ...Z)")
        if at <= now:
            raise InvalidInput("$.expires_at", "must be in the future")
        return at
    return None


async def create_token(request: web.Request) -> web.Response:
    body = await decode(request, TokenCreate)
    expires_at = _expiry(body, datetime.now(UTC))
    store = TokenStore(await request.app[BACKENDS].pool())
    info, text = await store.create(body.name, body.scopes, expires_at, actor=principal_of(request).name)
    out = token_out(info)
    return respond(TokenCreated(**msgspec.structs.asdict(out), token=text), status=201)


async def list_tokens(request: web.Request) -> web.Response:
    tokens = await TokenStore(await request.app[BACKENDS].pool()).list_tokens()
    return respond(TokenList(items=[token_out(t) for t in tokens]))


async def revoke_token(request: web.Request) -> web.Response:
    store = TokenStore(await request.app[BACKENDS].pool())
    await store.revoke(request.match_info["name"], actor=principal_of(request).name)
    return web.Response(status=204)


async def token_history(request: web.Request) -> web.Response:
    limit = query_limit(request)
    before = decode_cursor(request.query.get("cursor"))
    entries = await AuditStore(await request.app[BACKENDS].pool()).history("token", before, limit)
    return respond(audit_page(entries, limit))


ROUTES = (
    Route("GET", "/api/tokens", list_tokens, "Live tokens (never their text)", response=TokenList,
          errors=DB_ERRORS, scope="admin"),
    Route("POST", "/api/tokens", create_token, "Create a token; its text is in this response only", status=201,
          body=TokenCreate, response=TokenCreated, errors=(*BODY_ERRORS, Conflict, *DB_ERRORS), scope="admin"),
    Route("GET", "/api/tokens/history", token_history, "Token creations and revocations, newest first",
          response=AuditList, errors=(InvalidInput, *DB_ERRORS), query=PAGE, scope="admin"),
    Route("DELETE", "/api/tokens/{name}", revoke_token, "Revoke a token: refused at once on every replica",
          status=204, errors=(NotFound, *DB_ERRORS), scope="admin"),
)  # fmt: skip
