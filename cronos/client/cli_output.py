"""What the `cronos` commands print for people: aligned tables and UTC times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime


def when(at: datetime | str | None, never: str = "never") -> str:
    """A time (or the API's RFC 3339 text of one) in UTC to the second; `never` for None."""
    if at is None:
        return never
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    lines = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def counted(n: int, noun: str) -> str:
    """`1 job`, `3 jobs`: a count with its noun, for the CLI's closing lines."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
