"""A local HTTP target for `http` jobs that records every delivery.

The checker reads its log to prove no (tick, attempt) was delivered twice. It runs in a
thread of the test process, on 127.0.0.1 only, so it lives through every fault the
tests inject into the cluster.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Delivery:
    at: float  # wall clock, seconds since the epoch
    path: str
    idempotency_key: str | None
    attempt: str | None
    body: bytes = b""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        delivery = Delivery(
            time.time(), self.path, self.headers.get("Idempotency-Key"), self.headers.get("X-Cronos-Attempt"), body
        )
        with self.server.lock:
            self.server.deliveries.append(delivery)
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []


class Receiver:
    """`start()`, point jobs at `url(path)`, read `deliveries()`, `stop()`."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-receiver", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        assert self._server is not None, "receiver not started"
        return int(self._server.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def deliveries(self) -> list[Delivery]:
        assert self._server is not None, "receiver not started"
        with self._server.lock:
            return list(self._server.deliveries)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
