"""The environment's proxies, read once per process, still route tamesu's HTTP clients as httpx's trust_env
would: a request for a proxied URL goes to the proxy (in absolute form), one NO_PROXY names goes direct."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tamesu.conversation import Session, UserTurn
from tamesu.net import clients as _http
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.rest.target import RestSpec, RestTarget

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


async def _answer_with_request_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An HTTP/1.1 server that answers every request with the target of its request line, as the text."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")),
                          0)
            await reader.readexactly(length)
            body = json.dumps({"text": lines[0].split(" ")[1]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[str]:
    listening = await asyncio.start_server(_answer_with_request_line, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        listening.close()
        await listening.wait_closed()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    _http.environment_proxies.cache_clear()
    yield monkeypatch
    _http.environment_proxies.cache_clear()  # the next test reads the environment as it really is


async def _reply(url: str, tmp_path: Path) -> str:
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=tmp_path,
                      redactor=secrets.redactor, run_id="t", base_dir=tmp_path)
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": url}), "api")
    await target.open(session)
    try:
        return (await target.send(UserTurn(text="hello"))).text
    finally:
        await target.close()


async def test_a_proxied_url_goes_to_the_proxy(server: str, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.setenv("HTTP_PROXY", server)
    # a name that resolves nowhere: only the proxy can answer it
    assert await _reply("http://agent.invalid/chat", tmp_path) == "http://agent.invalid/chat"
    assert _http.environment_proxies() == {"http://": server}


async def test_no_proxy_goes_direct(server: str, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: a request sent there fails
    environment.setenv("NO_PROXY", "127.0.0.1")
    assert await _reply(f"{server}/chat", tmp_path) == "/chat"


async def test_without_proxies_nothing_is_mounted(environment: pytest.MonkeyPatch, server: str,
                                                  tmp_path: Path) -> None:
    assert _http.client_options()["mounts"] is None
    assert await _reply(f"{server}/chat", tmp_path) == "/chat"


async def test_the_a2a_targets_client_goes_through_the_proxy(server: str, environment: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from tamesu.suite.schema import ConnectSpec
    from tamesu.targets.a2a._wire import Wire

    environment.setenv("HTTP_PROXY", server)
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=tmp_path,
                      redactor=secrets.redactor, run_id="t", base_dir=tmp_path)
    wire = Wire(session=session, connect=ConnectSpec(), turn_timeout=10, headers={}, what="a2a target")
    try:
        answer = await wire.http.post("http://agent.invalid/a2a", json={"hello": 1})
    finally:
        await wire.http.aclose()
    assert answer.json() == {"text": "http://agent.invalid/a2a"}


async def test_the_mcp_targets_client_goes_through_the_proxy(server: str, environment: pytest.MonkeyPatch) -> None:
    from tamesu.targets.mcp.connection import http_client

    environment.setenv("HTTP_PROXY", server)
    async with http_client({}, 5, max_bytes=1_000_000) as http:
        answer = await http.post("http://agent.invalid/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.json() == {"text": "http://agent.invalid/mcp"}


async def test_a_model_providers_client_goes_through_the_proxy(server: str, environment: pytest.MonkeyPatch) -> None:
    from tamesu.models._thin import transport_client

    environment.setenv("HTTP_PROXY", server)
    async with transport_client() as http:
        answer = await http.post("http://models.invalid/v1/chat/completions", json={"model": "m"})
    assert answer.json() == {"text": "http://models.invalid/v1/chat/completions"}
