"""Bodies of /api/tokens and of the audit trail (GET /api/jobs/{id}/history, /api/tokens/history,
/api/channels/history)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from cronos.scopes import Scope
from cronos.store.audit import AuditFields
from cronos.store.tokens import NAME_RE, NAME_RULE

TokenName = Annotated[str, Meta(pattern=f"^{NAME_RE.pattern}$", description=NAME_RULE)]
ExpiresIn = Annotated[int, Meta(ge=60, le=10 * 366 * 86_400, description="lifetime in seconds from now")]


class TokenCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A new token; without `expires_in_s` / `expires_at` it never expires (revoke it instead)."""

    name: TokenName
    scopes: Annotated[list[Scope], Meta(min_length=1, max_length=3, description="admin > write > read")]
    expires_in_s: ExpiresIn | UnsetType = UNSET
    expires_at: datetime | UnsetType = UNSET


class TokenOut(msgspec.Struct, kw_only=True):
    """A token as listed: never its text nor its hash."""

    name: str
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None


class TokenCreated(TokenOut, kw_only=True):
    token: str  # shown this once; only its SHA-256 is stored


class TokenList(msgspec.Struct, kw_only=True):
    items: list[TokenOut]


class AuditOut(AuditFields, kw_only=True):
    """Who (`actor`: a token's name, `local`, `admin-token` or `cli`) did what, when; the job's
    or channel's fields before and after the change, secrets shown as `***` (a channel's id and
    name are in `detail`)."""


class AuditList(msgspec.Struct, kw_only=True):
    items: list[AuditOut]
    next_cursor: str | None


class SignInState(msgspec.Struct, kw_only=True):
    """GET /auth/session: whether the console offers sign-in, and who this browser's session is."""

    provider: str | None = msgspec.field(default=None)  # the sign-in button's words; null: sign-in is off
    actor: str | None = None  # the signed-in person as the audit trail names them; null: nobody
    scopes: list[Scope] = msgspec.field(default_factory=list)
    expires_at: datetime | None = None
    csrf: str | None = None  # send as X-CSRF-Token with every non-GET request carrying the session cookie
