"""Tasks whose output a reader follows live (`cronos dev --import tests.cluster.output_tasks`): the
CLI's `runs logs -f` and the console's run page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import cronos


@cronos.task("out.gated", replace=True)
def gated(payload: dict[str, Any], ctx: cronos.RunContext) -> None:  # in a thread: it may block
    """Writes `first`, waits until the file `payload.gate` exists (the reader saw it), writes `last`."""
    print("first line")
    ctx.logger.warning("waiting for the reader")
    gate, deadline = Path(payload["gate"]), time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("last line")
