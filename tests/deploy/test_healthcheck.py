"""deploy/healthcheck.py, the image's HEALTHCHECK, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import importlib.util
import socket
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.deploy.manifests import DEPLOY


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cronos_healthcheck", DEPLOY / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hc = _load()


class _Role(http.server.BaseHTTPRequestHandler):
    """Answers what a Cronos process serves: /livez (dispatcher, executor) and /openapi.json (api)."""

    def do_GET(self) -> None:
        self.send_response(200 if self.path in ("/livez", "/openapi.json") else 404)
        self.end_headers()
        self.wfile.write(b"{}\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Role)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_role_is_read_from_the_command_line() -> None:
    assert hc.role_of(["/opt/cronos/bin/python", "/opt/cronos/bin/cronos", "executor", "--import", "x"]) == "executor"
    assert hc.role_of(["cronos", "api"]) == "api"
    assert hc.role_of(["sleep", "10"]) == ""


@pytest.mark.parametrize(("role", "env_key"), [("api", "PORT"), ("executor", "CRONOS_METRICS_PORT")])
def test_healthy_when_metrics_answer(role: str, env_key: str, metrics_port: int) -> None:
    ok, detail = hc.check(role, {env_key: str(metrics_port)})
    assert ok, detail


@pytest.mark.parametrize(("role", "env_key"), [("api", "PORT"), ("dispatcher", "CRONOS_METRICS_PORT")])
def test_unhealthy_when_nothing_listens(role: str, env_key: str) -> None:
    ok, detail = hc.check(role, {env_key: str(_closed_port())})
    assert not ok
    assert role in detail


def test_roles_without_a_port_are_healthy_while_running() -> None:
    assert hc.check("dispatcher", {"CRONOS_METRICS_PORT": "0"})[0]
    assert hc.check("migrate", {})[0]
