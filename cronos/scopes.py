"""The API's cluster-wide scopes and what each implies: one rule for tokens and signed-in people.

Pure: no I/O. admin holds write, write holds read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[str, ...] = get_args(Scope)

_IMPLIES: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"read", "write"}),
    "admin": frozenset({"read", "write", "admin"}),
}


def effective(scopes: Iterable[str]) -> frozenset[str]:
    held: frozenset[str] = frozenset()
    for scope in scopes:
        held |= _IMPLIES.get(scope, frozenset())
    return held
