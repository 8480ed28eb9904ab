"""What a signed-in person may do, from the groups their identity provider says they are in.

CRONOS_OIDC_GROUPS maps a group to what it grants, as JSON (`{"ops": "admin", "devs": ["write"]}`)
or compactly (`ops=admin,devs=write`). Today a grant is one of the API's cluster-wide scopes; a
later namespace-roles change adds grant forms (a namespace and its role) to `parse_grant` and
`grants_for`, and keeps this table's shape. A group the table does not name grants nothing, and a
person whose groups grant nothing is refused at sign-in. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from cronos.scopes import SCOPES

# group -> the scopes it grants (sorted, unique); a tuple of pairs so Settings stays hashable.
GroupGrants = tuple[tuple[str, tuple[str, ...]], ...]


def parse_grant(group: str, value: object) -> tuple[str, ...]:
    """One group's grant: a scope or a list of scopes. ValueError says what is wrong."""
    given = [value] if isinstance(value, str) else value
    if not isinstance(given, list) or not given or not all(isinstance(v, str) for v in given):
        raise ValueError(f"must map each group to a scope or a list of scopes; {group!r} does not")
    for scope in given:
        if scope not in SCOPES:
            raise ValueError(f"must grant one of {', '.join(SCOPES)}; {group!r} grants {scope!r}")
    return tuple(sorted(set(given), key=SCOPES.index))


def _pairs(text: str) -> dict[str, object]:
    if text.startswith("{"):
        try:
            table = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object of group to scope ({exc.msg})") from None
        if not isinstance(table, dict):
            raise ValueError("must be a JSON object of group to scope")
        return table
    pairs: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        group, eq, scope = part.rpartition("=")
        if not eq or not group.strip():
            raise ValueError(f"must be group=scope pairs separated by commas; {part!r} is not one")
        pairs.setdefault(group.strip(), []).append(scope.strip())
    return dict(pairs)


def parse_group_grants(text: str) -> GroupGrants:
    """CRONOS_OIDC_GROUPS decoded: JSON or `group=scope,...` (a group named twice holds both)."""
    text = text.strip()
    if not text:
        return ()
    table = _pairs(text)
    for group in table:
        if not group.strip():
            raise ValueError("must not name an empty group")
    return tuple(sorted((group, parse_grant(group, value)) for group, value in table.items()))


def grants_for(groups: Iterable[str], table: GroupGrants) -> frozenset[str]:
    """The scopes the person's groups grant together (before implication: cronos.scopes.effective)."""
    held = set(groups)
    return frozenset(scope for group, scopes in table if group in held for scope in scopes)


def claimed_groups(claims: dict[str, object], claim: str) -> tuple[str, ...]:
    """The groups an ID token's claim names: a list of strings, or one string; anything else none."""
    value = claims.get(claim)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def actor_of(claims: dict[str, object]) -> str:
    """Who the audit trail names: `oidc:` and the person's email, else their subject at the provider."""
    email, subject = claims.get("email"), claims.get("sub")
    return "oidc:" + (email if isinstance(email, str) and email else str(subject))
