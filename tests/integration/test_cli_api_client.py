"""cronos.client.api_client against small real HTTP servers: what the CLI does with answers that are not the API's."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cronos.client.api_client import ApiClient, ApiError, ApiUnreachable
from tests.cluster.servers import free_port

SEEN: list[str | None] = []


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        SEEN.append(self.headers.get("Authorization"))
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/moved"))
            self.end_headers()
        elif self.path == "/teapot":
            self.send_response(418)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>\n<b>short\nand stout</b></html>")
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextlib.contextmanager
def _server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else() -> None:
    SEEN.clear()
    with _server() as base, _server() as elsewhere:
        client = ApiClient(base, "cronos_secret_token")
        with pytest.raises(ApiError) as caught:
            client.call("GET", f"/moved{elsewhere}/steal")
    assert caught.value.status == 302
    assert SEEN == ["Bearer cronos_secret_token"]  # the first server only


def test_an_answer_that_is_not_a_problem_body_is_one_line() -> None:
    with _server() as base:
        with pytest.raises(ApiError) as caught:
            ApiClient(base).call("GET", "/teapot")
        assert ApiClient(base + "/").call("GET", "/anything") == {"ok": True}
    assert caught.value.status == 418 and "\n" not in str(caught.value) and "short and stout" in str(caught.value)


def test_nothing_listening_is_one_line_without_the_urls_password() -> None:
    with pytest.raises(ApiUnreachable) as caught:
        ApiClient(f"http://ops:hunter2@127.0.0.1:{free_port()}", timeout_s=5).call("GET", "/api/jobs")
    assert "cannot reach the API at http://127.0.0.1:" in str(caught.value) and "hunter2" not in str(caught.value)
