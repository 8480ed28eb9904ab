"""Jenkins' `H` in a cron field (issue 40): a value of the field each job keeps, spread across jobs.

Pure. `H` is one value of its field, `H(a-b)` one value within a-b, `H/n` every n from an offset
below n (`H/15` in minutes: 7, 22, 37, 52 for one job, 3, 18, 33, 48 for another), `H(a-b)/n`
the same within a-b. In the day of month `H` keeps to 1-28 (every month has them), in the day of
week to 0-6. Other items of the field stay as they are (`H,30`).

The value comes from the job's **name** (`key`), hashed per field: it is the same on every host,
after every restart and in every environment a jobs file is applied to (an id would change when a
job is made again), it is known before the job exists (`cronos apply --dry-run` shows it), and no
other job moves it (a position in the fleet would). Renaming a job moves it, as a new job. `R`
(random) stays refused: a random value is what `jitter_s` is for.

Nothing past this module sees `H`: `hashed(expression, name)` is a plain expression the parser,
the leader and every view read as any other.
"""

from __future__ import annotations

import hashlib
import re

from cronos.cron_fields import DOM, DOW, HOUR, MINUTE, MONTH, SECOND, Field, split
from cronos.errors import InvalidSchedule

EXPR = "$.cron_expression"
_ITEM = re.compile(r"H(?:\((\d{1,2})-(\d{1,2})\))?(?:/(\d{1,3}))?", re.ASCII | re.IGNORECASE)
_SPANS = {DOM.name: (1, 28), DOW.name: (0, 6)}  # H alone: days every month has, weekdays once each
_FIELDS = (SECOND, MINUTE, HOUR, DOM, MONTH, DOW)


def has_hash(expression: str) -> bool:
    """The expression holds an `H` item (a cheap test: only then is `hashed` needed)."""
    if "h" not in expression.lower() or expression.lstrip().startswith("@"):
        return False
    return any(part[:1] in ("H", "h") for token in expression.split() for part in token.split(","))


def offset(key: str | None, field: Field, size: int) -> int:
    """The job's value in 0..size-1 for `field`: a hash of its key, the same on every host (None: 0,
    the value every job would have without the spread)."""
    if key is None:
        return 0
    return stable(key, field.name, size)


def stable(key: str, label: str, size: int) -> int:
    """A value in 0..size-1 that `key` picks for `label` (a field's name, `spread`): SHA-256 of both,
    the same on every host, after every restart, whatever other jobs exist."""
    digest = hashlib.sha256(f"{label}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % size


def _fail(field: Field, part: str, why: str) -> InvalidSchedule:
    return InvalidSchedule(EXPR, f"{field.name} field {part!r}: {why}")


def _item(part: str, field: Field, key: str | None) -> str:
    match = _ITEM.fullmatch(part)
    if match is None:
        raise _fail(field, part, "write H, H(a-b), H/n or H(a-b)/n")
    low, high = _SPANS.get(field.name, (field.low, field.high))
    if match[1] is not None:
        low, high = int(match[1]), int(match[2])
        if not field.low <= low <= high <= field.high:
            raise _fail(field, part, f"the range must lie within {field.low}-{field.high}, low to high")
    if match[3] is None:
        return str(low + offset(key, field, high - low + 1))
    step = int(match[3])
    if step < 1:
        raise _fail(field, part, "the step must be a positive integer")
    start = low + offset(key, field, min(step, high - low + 1))
    return f"{start}-{high}/{step}"


def hashed(expression: str, key: str | None) -> str:
    """`expression` with each `H` item replaced by the values `key` picks; itself when it has none.
    `key` None: each `H` at the start of its range, the herd the spread flattens (the fleet view).
    InvalidSchedule (naming $.cron_expression) for a malformed `H` item."""
    if not has_hash(expression):
        return expression
    fields = split(expression)
    named = _FIELDS[-len(fields) :]
    out = []
    for token, field in zip(fields, named, strict=True):
        parts = token.split(",")
        out.append(",".join(_item(p, field, key) if p[:1] in ("H", "h") else p for p in parts))
    return " ".join(out)


def described(expression: str, key: str) -> str | None:
    """What `H` is for this job, in words (`H` in the minute field is 37 for the job named 'x'),
    None without `H`."""
    if not has_hash(expression):
        return None
    fields, plain = split(expression), split(hashed(expression, key))
    named = _FIELDS[-len(fields) :]
    said = [
        f"`{token}` in the {field.name} field is `{value}`"
        for token, value, field in zip(fields, plain, named, strict=True)
        if token != value
    ]
    return f"{', '.join(said)} for the job named {key!r} (from its name: stable across restarts and other jobs)"
