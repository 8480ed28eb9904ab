"""`cronos` processes started as a deployment would start them, for the tests/deploy process tests
(tests/deploy/test_image.py starts the same from the image)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cluster.servers import cronos_command

_DROP = ("DATABASE_URL", "REDIS_URL", "PORT")


class Processes:
    """`cronos` processes with logs in a directory (its cwd too: no .env of the repository is read)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.drained: dict[str, float] = {}

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        argv, env = self.command(name, args, env)
        with (self.root / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(
                argv, env=env, cwd=self.root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs[name] = proc
        return proc

    def command(self, name: str, args: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """The command line and environment that start `cronos <args>` with `env` (here: the venv's cronos)."""
        base = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("CRONOS_")}
        return [*cronos_command(), *args], {**base, **env, "PYTHONUNBUFFERED": "1"}

    def role_pid(self, name: str) -> int:
        """The process running `cronos`, the one SIGTERM goes to (here: the one started)."""
        return self.procs[name].pid

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text()

    def stop(self, name: str, timeout: float = 20) -> int:
        """SIGTERM, as the kubelet and `docker compose stop` send; the exit code. The seconds it took
        are kept in `drained`."""
        proc = self.procs[name]
        started = time.monotonic()
        if proc.poll() is None:
            os.kill(self.role_pid(name), signal.SIGTERM)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log = self.log(name)[-3000:]
            raise AssertionError(f"{name} did not stop within {timeout}s of SIGTERM:\n{log}") from None
        self.drained[name] = time.monotonic() - started
        return code

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
