"""A task that blocks its executor's event loop, as a careless `async def` task does
(tests/deploy/test_probes.py imports it into a real executor: `--import tests.deploy.loop_blocker`)."""

from __future__ import annotations

import time
from typing import Any

import cronos


@cronos.task("block_loop")
async def block_loop(payload: dict[str, Any], ctx: cronos.RunContext) -> str:
    time.sleep(float(payload["seconds"]))  # noqa: ASYNC251  # on purpose: the loop runs nothing meanwhile
    return "unblocked"
