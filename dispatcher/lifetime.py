"""What a side loop needs of the leadership term it lives in: sleep, and a check that the term goes on.

A Protocol, so the loops (reaper, watchdog, auditor, housekeeping, retention) depend on this
and not on dispatcher.term, which starts them.
"""

from __future__ import annotations

from typing import Protocol


class Lifetime(Protocol):
    def checkpoint(self) -> None:
        """Raise CancelledError once the term is over."""

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or less when the term ends (then raise CancelledError)."""
