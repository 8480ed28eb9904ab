"""A real `cronos api` (or `cronos dev`) process and the real `cronos` CLI run against it.

Shared by the jobs CLI and apply tests: every call is a subprocess with a clean environment
(no Cronos variable of the test runner leaks in), cwd a temporary folder (no .env).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from cronos.settings import VARIABLES
from tests.cluster.servers import free_port
from tests.serving import serving

CRONOS = str(Path(sys.executable).parent / "cronos")
REPO = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in VARIABLES}, **extra}


@contextlib.contextmanager
def api_process(tmp_path: Path, database_url: str, key_prefix: str, *command: str, **env: str) -> Iterator[str]:
    """`cronos api` (or the given command, e.g. `dev --import ...`) on a free port; yields its URL."""
    port = free_port()
    argv = [CRONOS, *(command or ("api",))]
    variables = {"PORT": str(port), "DATABASE_URL": database_url, "CRONOS_KEY_PREFIX": key_prefix}
    url = f"http://127.0.0.1:{port}"
    environment = clean_env(**variables, CRONOS_API_HOST="127.0.0.1", PYTHONPATH=str(REPO), **env)
    with serving(argv, ready=f"{url}/health", log=tmp_path / f"api-{port}.log", what=f"{argv[1]} /health",
                 stop_s=30, cwd=tmp_path, env=environment):  # fmt: skip
        yield url


def cli(cwd: Path, url: str, *args: str, token: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """The `cronos` command against the API at `url`."""
    variables = clean_env(CRONOS_API_URL=url, **({"CRONOS_API_TOKEN": token} if token else {}), **env)
    return subprocess.run([CRONOS, *args], cwd=cwd, env=variables, capture_output=True, text=True, timeout=120)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}\n{done.stdout}"
    return done.stdout


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return msgspec.json.decode(ok(done))


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """A failure: a non-zero exit and one line on stderr holding every word."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), done.stderr
    return lines[0]


def post(url: str, path: str, body: Any) -> Any:
    """A JSON POST straight to the API (a job created through the API alone)."""
    request = urllib.request.Request(
        url + path, data=msgspec.json.encode(body), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return msgspec.json.decode(resp.read())


def get(url: str, path: str, token: str = "") -> Any:
    """A GET straight to the API (not through the CLI under test)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=10) as resp:
        return msgspec.json.decode(resp.read())
