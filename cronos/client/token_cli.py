"""`cronos token create|list|revoke|reopen-local`: API tokens managed on the server, straight in
PostgreSQL.

For the first token (the API is in protected mode until one is created) and for operators
with database access; `reopen-local` is the only way back to protected mode once a token was
created (the last one expiring or revoked does not reopen it). `create` prints the token alone
on its last line of stdout, so `TOKEN=$(cronos token create --name ci --scope write | tail -1)`
captures it. Errors are one line on stderr (main prints them) and a non-zero exit.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

from cronos.client.cli_output import table as cli_table
from cronos.client.cli_output import when as _when
from cronos.errors import InvalidInput
from cronos.settings import Settings
from cronos.store.audit import CLI
from cronos.store.db import connect, migrate
from cronos.store.tokens import TokenInfo, TokenStore

_AGE = re.compile(r"(\d{1,6})([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_age(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `2w`, `3600s` -> a timedelta (at least a minute)."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise InvalidInput("--expires", f"{text!r} is not an age such as 90d, 12h, 30m, 2w")
    age = timedelta(seconds=int(match[1]) * _UNIT_S[match[2]])
    if age < timedelta(minutes=1) or age > timedelta(days=3660):
        raise InvalidInput("--expires", "must be between 1 minute and 10 years")
    return age


def table(tokens: list[TokenInfo]) -> str:
    rows = [
        (t.name, ",".join(t.scopes), _when(t.created_at), _when(t.last_used_at), _when(t.expires_at)) for t in tokens
    ]
    return cli_table(("NAME", "SCOPES", "CREATED", "LAST USED", "EXPIRES"), rows)


async def run_token_command(args: argparse.Namespace, settings: Settings) -> int:
    expires_at = None
    if args.action == "create" and args.expires is not None:
        expires_at = datetime.now(UTC) + parse_age(args.expires)  # bad input fails before any I/O
    await migrate(settings.database_url)  # the tables exist from here on, as after `cronos migrate`
    pool = await connect(settings.database_url, min_size=1, max_size=1)
    try:
        store = TokenStore(pool)
        if args.action == "create":
            try:
                info, text = await store.create(args.name, args.scopes, expires_at, actor=CLI)
            except InvalidInput as exc:
                raise InvalidInput("--name" if exc.field == "$.name" else "--scope", exc.message) from None
            expiry = "never expires" if info.expires_at is None else f"expires {_when(info.expires_at)}"
            print(f"Created token {info.name!r} with scopes {','.join(info.scopes)}; it {expiry}.")
            print("It is shown this once (only its hash is stored); send it as `Authorization: Bearer <token>`:")
            print(text)
        elif args.action == "list":
            print(table(await store.list_tokens()))
        elif args.action == "revoke":
            await store.revoke(args.name, actor=CLI)
            print(f"Revoked token {args.name!r}.")
        else:
            reopened = await store.reopen_local(actor=CLI)
            state = "Protected mode reopened" if reopened else "Protected mode was already open"
            print(f"{state}: while no token exists, clients on this machine (loopback) act as admin without one.")
    finally:
        await pool.close()
    return 0
