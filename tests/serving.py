"""A server process a test starts and stops: up once its address answers, stopped however it ends."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.waiting import answers, block_until


@contextlib.contextmanager
def serving(
    argv: list[str], *, ready: str, log: Path, what: str, timeout: float = 60, stop_s: float = 15, **popen: Any
) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` started with its output appended to `log`, yielded once a GET of `ready` answers 200
    (an exit before that fails with the log's tail); terminated afterwards, killed after `stop_s`."""
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **popen)
    try:
        block_until(lambda: answers(ready) or proc.poll() is not None, timeout=timeout, interval=0.05, what=what)
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(stop_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
