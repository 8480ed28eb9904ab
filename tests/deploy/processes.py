"""`cronos` processes started as a deployment would start them, for the tests/deploy process tests."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.cluster.servers import cronos_command

_DROP = ("DATABASE_URL", "REDIS_URL", "PORT")


class Processes:
    """`cronos` processes with logs in a directory (its cwd too: no .env of the repository is read)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        base = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("CRONOS_")}
        with (self.root / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(
                [*cronos_command(), *args],
                env={**base, **env, "PYTHONUNBUFFERED": "1"},
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text()

    def stop(self, name: str, timeout: float = 20) -> int:
        """SIGTERM, as the kubelet and `docker compose stop` send; the exit code."""
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log = self.log(name)[-3000:]
            raise AssertionError(f"{name} did not stop within {timeout}s of SIGTERM:\n{log}") from None

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
