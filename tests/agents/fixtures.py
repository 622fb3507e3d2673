"""pytest fixtures serving the agents of `agents.rest_agents`; use them with `pytest_plugins` or an import."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from agents.rest_agents import RestAgents, serve


@dataclass
class RunningAgents:
    url: str
    """http://127.0.0.1:PORT, every agent under its path (/chat, /sse, /ws, /jobs, /bot, /conversations)."""
    state: RestAgents

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"


@pytest.fixture(scope="module")
def rest_agents() -> Iterator[RunningAgents]:
    server, state = serve()
    try:
        yield RunningAgents(url=server.url, state=state)
    finally:
        server.stop()


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A URL on 127.0.0.1 where nothing listens: connecting is refused at once. The port stays bound (never
    listening) until the test ends, so no server the test starts afterwards can be given it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/chat"
