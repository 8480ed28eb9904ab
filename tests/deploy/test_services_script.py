"""scripts/services.sh (`make run` on a fresh machine, issue 15 item 6): docker compose when an engine
answers, local services when installed, otherwise one line saying what to install.

No Docker engine runs here: the compose branch is driven by a stand-in `docker` command on PATH that
answers `info` and, for `compose up`, starts a real redis-server where the container would listen.
The local branch starts a real redis-server. PostgreSQL is never started here (it is shared): its
branches are covered by the shared server answering, and by a port where nothing listens.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import redis
import yaml

from tests.cluster.servers import free_port
from tests.deploy.manifests import ROOT, SCHEMAS

SCRIPT = ROOT / "scripts/services.sh"
COMPOSE = ROOT / "scripts/services.compose.yml"
SPEC = SCHEMAS / "compose-spec.json"
# What the script may use besides bash builtins: a PATH of these alone has no docker, PostgreSQL or Redis.
TOOLS = ("bash", "timeout", "sleep", "seq", "sed", "tail", "head", "dirname", "ls")
STAND_IN_DOCKER = """#!/bin/bash
echo "$*" >> "$DOCKER_CALLS"
case "$1 $2" in
  "info "*) exit 0 ;;
  "compose version") exit 0 ;;
  "compose -f") echo "SERVICES_REDIS_PORT=$SERVICES_REDIS_PORT" >> "$DOCKER_CALLS"
    exec redis-server --daemonize yes --bind 127.0.0.1 --port "$SERVICES_REDIS_PORT" --save "" --appendonly no ;;
esac
exit 1
"""


@pytest.fixture
def bare_path(tmp_path: Path) -> Path:
    """A bin folder holding only TOOLS: a machine without Docker, PostgreSQL or Redis."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    return folder


@pytest.fixture
def redis_port() -> Iterator[int]:
    """A free port; whatever redis-server the test started there is shut down after it."""
    port = free_port()
    yield port
    with contextlib.suppress(redis.ConnectionError):  # nothing was started, or it is gone already
        redis.Redis(port=port, socket_connect_timeout=1).shutdown(nosave=True)


def _services(tmp_path: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    variables = {**clean, "PATH": path, "SERVICES_LOG": str(tmp_path / "services.log"), "SERVICES_WAIT_S": "20"}
    return subprocess.run(
        [str(SCRIPT)], cwd=tmp_path, env={**variables, **env}, capture_output=True, text=True, timeout=120
    )


def _dead_url(scheme: str) -> str:
    return f"{scheme}://postgres@127.0.0.1:{free_port()}/cronos"


def test_without_docker_or_services_it_says_in_one_line_what_to_install(tmp_path: Path, bare_path: Path) -> None:
    done = _services(tmp_path, str(bare_path), DATABASE_URL=_dead_url("postgresql"), REDIS_URL=_dead_url("redis"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "PostgreSQL" in lines[0] and "Redis" in lines[0] and "install Docker" in lines[0]
    assert "apt-get install postgresql redis-server" in lines[0]


def test_services_that_answer_are_left_alone(tmp_path: Path, bare_path: Path, redis_port: int) -> None:
    subprocess.run(["redis-server", "--daemonize", "yes", "--port", str(redis_port), "--save", ""], check=True)
    done = _services(tmp_path, str(bare_path), REDIS_URL=f"redis://127.0.0.1:{redis_port}/0")  # shared PG on 5432
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_local_redis_server_is_started_on_the_urls_port(tmp_path: Path, bare_path: Path, redis_port: int) -> None:
    server = shutil.which("redis-server")
    assert server is not None
    (bare_path / "redis-server").symlink_to(server)
    (tmp_path / ".env").write_text(f"REDIS_URL='redis://127.0.0.1:{redis_port}/0'\n")  # read like the settings
    done = _services(tmp_path, str(bare_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"starting Redis on 127.0.0.1:{redis_port} (redis-server, no persistence)"
    assert redis.Redis(port=redis_port).ping()


def test_a_docker_engine_runs_the_missing_service_with_compose(
    tmp_path: Path, bare_path: Path, redis_port: int
) -> None:
    server = shutil.which("redis-server")
    assert server is not None
    (bare_path / "redis-server").symlink_to(server)  # for the stand-in's container, not the script
    docker = bare_path / "docker"
    docker.write_text(STAND_IN_DOCKER)
    docker.chmod(0o755)
    calls = tmp_path / "calls"
    done = _services(tmp_path, str(bare_path), REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", DOCKER_CALLS=str(calls))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"starting Redis with docker compose on 127.0.0.1:{redis_port}"
    made = calls.read_text().splitlines()
    assert f"compose -f {COMPOSE} up -d --wait redis" in made and f"SERVICES_REDIS_PORT={redis_port}" in made
    assert not any("postgres" in call for call in made)  # PostgreSQL answered: left alone
    assert redis.Redis(port=redis_port).ping()


def test_a_url_to_another_host_is_not_started_here(tmp_path: Path, bare_path: Path) -> None:
    done = _services(tmp_path, str(bare_path), DATABASE_URL="postgresql://u:pw@db.invalid:5432/cronos")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "db.invalid:5432 (DATABASE_URL)" in done.stderr and "pw" not in done.stderr


def test_the_services_compose_file_fits_the_compose_spec() -> None:
    jsonschema.Draft7Validator(json.loads(SPEC.read_text())).validate(yaml.safe_load(COMPOSE.read_text()))


def test_the_services_compose_file_publishes_both_on_loopback() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert services["postgres"]["image"] == "postgres:16" and services["redis"]["image"] == "redis:7"
    assert services["postgres"]["ports"] == ["127.0.0.1:${SERVICES_PG_PORT:-5432}:5432"]
    assert services["redis"]["ports"] == ["127.0.0.1:${SERVICES_REDIS_PORT:-6379}:6379"]
    assert services["postgres"]["environment"]["POSTGRES_HOST_AUTH_METHOD"] == "trust"  # the default DATABASE_URL
    assert all(service["healthcheck"]["test"] for service in services.values())  # `up --wait` waits on them
