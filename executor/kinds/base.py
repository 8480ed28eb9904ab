"""What every kind of work shares: its environment, its expected failure, bounded excerpts.

`RunFailed` is an expected failure with a clear message (and maybe a result excerpt,
such as an HTTP response body); any other exception fails the run with its traceback.
An excerpt is text fit to store: at most its bound of UTF-8, and no NUL (PostgreSQL's
`text` cannot hold one: a NUL in a result would fail the whole batch of finishes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp

from cronos.settings import Settings
from executor.host_limits import HostLimiter
from executor.output import Writer


class RunFailed(Exception):
    def __init__(self, message: str, result: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


@dataclass(frozen=True, slots=True)
class Env:
    """What every kind may use: settings, the executor's shared HTTP client and its per-host limits;
    and where runs' output goes (None: kept nowhere)."""

    settings: Settings
    http: aiohttp.ClientSession
    hosts: HostLimiter = field(default_factory=HostLimiter)
    output: Writer | None = None


def excerpt(value: str | bytes | None, max_bytes: int) -> str | None:
    """At most `max_bytes` of UTF-8 (cut on a character boundary), marked when cut."""
    if value is None:
        return None
    raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
    if len(raw) <= max_bytes:
        return _text(raw)
    return _text(raw[:max_bytes], cut_end=True) + f"…[{len(raw) - max_bytes} more bytes]"


class Capture:
    """A stream read as it arrives and kept only as far as its excerpt of `max_bytes` needs:
    the first half and the last half; what lies between is counted and dropped.

    Memory stays at `max_bytes` plus one chunk whatever the stream's length.
    """

    __slots__ = ("_head_max", "_tail_max", "head", "tail", "total")

    def __init__(self, max_bytes: int) -> None:
        self._head_max = max_bytes - max_bytes // 2
        self._tail_max = max_bytes // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0  # bytes seen, kept or not

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        chunk = memoryview(data)
        room = self._head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk or not self._tail_max:
            return
        if len(chunk) >= self._tail_max:
            self.tail[:] = chunk[len(chunk) - self._tail_max :]
        else:
            self.tail += chunk
            if len(self.tail) > self._tail_max:
                del self.tail[: len(self.tail) - self._tail_max]

    def excerpt(self) -> str:
        """The whole stream when it fits, else its head and tail around the count of bytes dropped."""
        dropped = self.total - len(self.head) - len(self.tail)
        if not dropped:
            return _text(bytes(self.head + self.tail))
        return (
            _text(bytes(self.head), cut_end=True)
            + f"…[{dropped} bytes dropped]…"
            + _text(bytes(self.tail), cut_start=True)
        )


def _text(raw: bytes, *, cut_start: bool = False, cut_end: bool = False) -> str:
    """UTF-8 text of `raw` without NUL; a character cut by a bound at either end is left out."""
    if cut_end:
        raw = raw[: _complete_end(raw)]
    if cut_start:
        lead = 0
        while lead < min(3, len(raw)) and raw[lead] & 0xC0 == 0x80:  # continuation bytes
            lead += 1
        raw = raw[lead:]
    return raw.decode("utf-8", "replace").replace("\0", "\N{REPLACEMENT CHARACTER}")


def _complete_end(raw: bytes) -> int:
    """Where `raw` ends once an incomplete trailing UTF-8 sequence is left out."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        width = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return len(raw) if width <= back else len(raw) - back
    return len(raw)
