"""A local HTTP server for test doubles of other services (a model provider, a bystander): records each request and
answers it with JSON from a function of the test's."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[["JsonDouble", dict[str, Any], "BaseHTTPRequestHandler"], tuple[int, dict[str, Any]]]


class JsonDouble(ThreadingHTTPServer):
    """`answer(server, body, handler) -> (status, payload)` for every POST (and GET); every request is kept in `requests`."""

    daemon_threads = True
    status = 200  # what a double answers with, for doubles that can fail
    delay = 0.0  # seconds a double waits before answering, for doubles that hang

    def __init__(self, answer: Answer):
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: JsonDouble

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        status, payload = self.server.answer(self.server, body, self)
        out = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST
