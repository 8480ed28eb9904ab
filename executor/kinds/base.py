"""What every kind of work shares: its environment, its expected failure, bounded excerpts.

`RunFailed` is an expected failure with a clear message (and maybe a result excerpt,
such as an HTTP response body); any other exception fails the run with its traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from cronos.settings import Settings


class RunFailed(Exception):
    def __init__(self, message: str, result: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


@dataclass(frozen=True, slots=True)
class Env:
    """What every kind may use: settings and the executor's shared HTTP client."""

    settings: Settings
    http: aiohttp.ClientSession


def excerpt(value: str | bytes | None, max_bytes: int) -> str | None:
    """At most `max_bytes` of UTF-8 (cut on a character boundary), marked when cut."""
    if value is None:
        return None
    raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
    if len(raw) <= max_bytes:
        return raw.decode("utf-8", "replace")
    return raw[:max_bytes].decode("utf-8", "ignore") + f"…[{len(raw) - max_bytes} more bytes]"
