"""The gateway served for real in a test: uvicorn running aceproject.asgi's application on a free loopback port, in a
thread with its own event loop (the database is the test's, so the tests using it take `transactional_db`)."""

from __future__ import annotations

import asyncio
import socket
import threading

import uvicorn

from tests.support.waiting import wait_for


class GatewayServer:
    def __init__(self):
        from aceproject.asgi import application

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        assert wait_for(lambda: self.server.started, 20), "the gateway did not start"

    def _serve(self):
        asyncio.run(self.server.serve())

    def base_url(self, provider: str, kind: str = "openai") -> str:
        """What the official SDK takes: `.../v1` for OpenAI, the root for Anthropic."""
        return f"{self.url}/gateway/{provider}/v1" if kind == "openai" else f"{self.url}/gateway/{provider}"

    def drained(self, seconds: float = 20) -> bool:
        """Every recording the gateway started has finished."""
        from gateway_app.asgi import gateway

        return bool(wait_for(lambda: not gateway.tasks, seconds))

    def close(self):
        self.server.should_exit = True
        self.thread.join(30)
