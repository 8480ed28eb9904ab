"""Namespaces (issue 41): what a namespace's name may be, and which one a request means.

Every job belongs to one namespace; `default` holds what existed before namespaces and whatever a
request that names none creates, so single-team use is unchanged. A name is a DNS label (it goes
in URLs, CLI flags and jobs files as it is): the column's CHECK (migration 0067) says the same.
Pure: no I/O.
"""

from __future__ import annotations

import re

from cronos.errors import InvalidInput, NotFound

DEFAULT = "default"
ALL = "*"  # a listing across every namespace (a cluster admin's view)
PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
_NAME = re.compile(PATTERN)
RULE = "1 to 63 of a-z, 0-9 and -, starting and ending with a letter or digit"
FIELD = "namespace"  # the query parameter, and the CLI's and the jobs file's key


def check(name: str, field: str = FIELD) -> str:
    """`name` if it can be a namespace's name, else InvalidInput naming `field`."""
    if _NAME.fullmatch(name) is None:
        raise InvalidInput(field, f"{name[:80]!r} is not a namespace name: {RULE}")
    return name


def of_query(value: str | None, *, every: bool = False) -> str:
    """The namespace a request's `?namespace=` names: `default` when left out; `*` (every
    namespace) only where the caller allows it (`every`)."""
    if value is None or value == "":
        return DEFAULT
    if value == ALL:
        if not every:
            raise InvalidInput(FIELD, "`*` (every namespace) is not accepted here: name one namespace")
        return ALL
    return check(value)


def missing(name: str) -> NotFound:
    """The refusal of a write into a namespace that does not exist."""
    return NotFound(
        f"no namespace named {name!r}: a cluster admin creates it (PUT /api/namespaces/{name}, "
        f"`cronos namespaces create {name}`)"
    )
