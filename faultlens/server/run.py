"""Running the app: `run_server` in the foreground (the CLI), `ServerThread` in the background (tests, scripts, embedding)."""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI

from .auth import check_bind


def run_server(app: FastAPI, *, host: str = "127.0.0.1", port: int = 4318, token: str | None = None, log_level: str = "info") -> None:
    """Serve `app` until interrupted. Refuses a non-loopback host without a token."""
    check_bind(host, token)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


class ServerThread:
    """uvicorn on a background thread; `port=0` picks a free port (read it from `.port`).

        with ServerThread(create_app(store)) as server:
            httpx.get(server.url + "/api/runs")
    """

    def __init__(self, app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None, log_level: str = "warning"):
        check_bind(host, token)
        self.host = host
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, name="faultlens-uvicorn", daemon=True)
        self.port = port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 20.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self, timeout: float = 20.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
