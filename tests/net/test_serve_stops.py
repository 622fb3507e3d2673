"""A server tamesu serves an app on (`tamesu.net.serve`, behind the remote agents, the listeners and the tests'
`serve` fixture) stops when told, whatever its app is still answering, and says so when it cannot.

Before: a response body that never waited (an endless generator) held the server's event loop for good once its
client had gone. Every write after the close was asyncio's `socket.send() raised exception.` (some 267,000 lines
at the end of one CI log, from tests/targets/test_session_open_urls.py's endless `session.open` answer),
`ThreadServer.stop` gave up after 5 s without a word, and the thread spun on for the rest of the process."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tamesu.net import serve
from tamesu.net.serve import ThreadServer

_PAD = b" " * 1_000_000


async def _endless(_: Any) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        while True:  # never waits: the server's own sends are its only turns of the loop
            yield _PAD

    return StreamingResponse(body(), media_type="application/json")


def _read_then_hang_up(server: ThreadServer, read: int, reset: bool) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        got = 0
        while got < read:
            got += len(client.recv(1 << 20))
        if reset:  # the client's process killed: a reset, not a close
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


@pytest.mark.parametrize(("read", "reset"), [(17_000_000, False), (100, True)], ids=["read-17MB", "reset-at-once"])
def test_a_server_whose_client_left_an_endless_answer_stops_without_a_flood(
        caplog: pytest.LogCaptureFixture, read: int, reset: bool) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    server = ThreadServer(Starlette(routes=[Route("/", _endless)])).start()
    _read_then_hang_up(server, read, reset)
    time.sleep(0.5)  # what the server writes meanwhile, after the client has gone
    started = time.monotonic()
    server.stop()
    flood = [r for r in caplog.records if r.getMessage() == "socket.send() raised exception."]
    assert not flood, f"{len(flood)} times asyncio's socket.send() raised exception."
    assert time.monotonic() - started < 4.0
    assert not server._thread.is_alive()


def test_a_server_that_cannot_stop_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    async def holds_the_loop(_: Any) -> Response:
        time.sleep(1.5)  # a blocking call in an async handler: nothing can stop the loop meanwhile
        return Response(b"late")

    monkeypatch.setattr(serve, "_STOP_S", 0.3)
    server = ThreadServer(Starlette(routes=[Route("/", holds_the_loop)])).start()
    with socket.create_connection((server.host, server.port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)  # the handler has the loop
        with pytest.raises(RuntimeError, match=r"did not stop within 0\.3 s \(a request it is still answering"):
            server.stop()
    server._thread.join(10)
    assert not server._thread.is_alive()


def test_an_answer_in_parts_still_arrives_whole() -> None:
    """The turn each send gives the loop changes nothing of what a client reads."""
    async def parts(_: Any) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for k in range(200):
                yield f"{k},".encode()
            await asyncio.sleep(0)

        return StreamingResponse(body(), media_type="text/plain")

    import httpx

    with ThreadServer(Starlette(routes=[Route("/", parts)])) as server:
        answer = httpx.get(server.url + "/", timeout=10)
    assert answer.text == "".join(f"{k}," for k in range(200))


async def _answers_in(request: Any) -> Response:
    await asyncio.sleep(float(request.query_params["s"]))
    return Response(b"answered")


def _asked(server: ThreadServer, seconds: float) -> socket.socket:
    client = socket.create_connection((server.host, server.port), timeout=10)
    client.sendall(f"GET /?s={seconds} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    time.sleep(0.3)  # the handler is waiting
    return client


def test_a_request_whose_client_has_gone_does_not_hold_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    # before: every stop waited out uvicorn's 2 s grace for it (a test's server whose tamesu run was stopped
    # mid-request), then logged its cancellation as "Exception in ASGI application"
    caplog.set_level(logging.INFO)
    server = ThreadServer(Starlette(routes=[Route("/", _answers_in)])).start()
    _asked(server, 60).close()
    time.sleep(0.2)  # the server has seen the close
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    assert not server._thread.is_alive()
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_client_still_waiting_gets_its_answer_as_the_server_stops() -> None:
    server = ThreadServer(Starlette(routes=[Route("/", _answers_in)])).start()
    with _asked(server, 0.8) as client:
        server.stop()  # the grace (2 s) lets it finish
        answer = b""
        while chunk := client.recv(1 << 16):  # to the server's close: a stopping server keeps no connection alive
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"answered"), answer
