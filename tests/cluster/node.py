"""One Cronos OS process of a test cluster: start, kill -9, SIGSTOP/SIGCONT, SIGTERM, restart.

Each node runs in its own process group, so a fault hits the node and whatever it spawned
(shell jobs), as when a container dies or freezes. Output is appended to its log file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Node:
    role: str  # dispatcher | executor | api
    name: str  # its CRONOS_NODE_ID
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    logfile: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    stopped: bool = False  # killed or terminated on purpose: its exit is not a finding

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines, oldest first (a restart appends to the same log)."""
        found = []
        for line in self.logfile.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    found.append(record)
        return found  # without the start markers and stray prints

    def events(self) -> list[str]:
        return [str(r.get("event", "")) for r in self.records()]

    def start(self) -> None:
        assert not self.alive, f"{self.name} is already running"
        with self.logfile.open("ab") as out:
            out.write(f"--- start {self.name} at {time.time():.3f}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.paused = self.stopped = False

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        """kill -9 of the node's whole process group; reaps it."""
        self.stopped = True
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)
        self.paused = False

    def terminate(self, timeout: float = 10) -> int | None:
        """SIGTERM and wait for a graceful exit (SIGKILL past `timeout`); returns the exit code."""
        if self.proc is None:
            return None
        self.stopped = True
        self.resume()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.signal(signal.SIGCONT)
            self.paused = False
