"""tamesu's aiohttp transport beneath httpx's and httpx2's API, in fewer calls (issue 28's twelfth pass,
docs/performance.md): the headers a request sends are `multi_items()` of its headers (`net.aio.header_pairs`), and
an answer's body is read through an async iterator, not an async generator (which asyncio tracks, and the clients
close apart)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tamesu.net.aio import aio_transport, header_pairs
from tamesu.net.serve import ThreadServer

_BYTES = [b"a", b"Z", b"-", b"\n", b"\xe9", b"\xc3\xa9", b" ", b"\x00"]


def _cases() -> list[list[tuple[Any, Any]]]:
    cases: list[list[tuple[Any, Any]]] = [
        [], [("A", "b")], [("Content-Type", "x"), ("X-A", "1"), ("x-a", "2")], [("AbC", ""), ("", "")],
        [(b"X-U", "é".encode()), (b"k", b"v")], [(b"X-L", b"\xe9\xff")], [(b"X-N", b"a\nb"), (b"c", b"d")],
        [(b"X-N\n", b"ab")]]
    pick = random.Random(28)
    for _ in range(1500):
        cases.append([(b"".join(pick.choices(_BYTES, k=pick.randint(0, 4))),
                       b"".join(pick.choices(_BYTES, k=pick.randint(0, 4)))) for _ in range(pick.randint(0, 6))])
    return cases


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_the_pairs_are_multi_items(module: Any) -> None:
    for case in _cases():
        headers = module.Headers(case)
        assert header_pairs(headers) == headers.multi_items(), case


@pytest.fixture
def echo() -> Iterator[str]:
    async def headers(request: Request) -> JSONResponse:
        return JSONResponse(request.headers.items())

    server = ThreadServer(Starlette(routes=[Route("/", headers, methods=["POST"])])).start()
    yield server.url
    server.stop()


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_a_request_sends_its_headers_without_multi_items(echo: str, module: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    transport = aio_transport(module)
    request = module.Request("POST", echo, content=b"{}", headers=[("X-Team", "qa"), ("x-team", "ops"),
                                                                    ("X-Name", "Zoë".encode())])
    monkeypatch.setattr(module.Headers, "multi_items", lambda self: pytest.fail("multi_items asked"))
    try:
        answer = await transport.handle_async_request(request)
        body = module.Response(answer.status_code, headers=answer.headers, stream=answer.stream)
        await body.aread()
    finally:
        await transport.aclose()
    seen = [tuple(pair) for pair in body.json()]
    assert ("x-team", "qa") in seen and ("x-team", "ops") in seen
    assert ("x-name", "Zoë".encode().decode("latin-1")) in seen  # the bytes as sent (the server reads Latin-1)


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_an_answers_body_is_read_whole_through_an_iterator_that_is_no_generator(module: Any) -> None:
    from collections.abc import AsyncGenerator

    async def chunked(request: Request) -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for part in (b"one ", b"", b"two ", "thrée".encode()):
                yield part

        return StreamingResponse(parts(), media_type="text/plain")

    server = ThreadServer(Starlette(routes=[Route("/", chunked)])).start()
    try:
        async with module.AsyncClient(transport=aio_transport(module)) as client, \
                client.stream("GET", server.url) as answer:
            assert not isinstance(answer.stream._stream.__aiter__(), AsyncGenerator)
            assert await answer.aread() == "one two thrée".encode()
    finally:
        server.stop()


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_a_url_with_credentials_sends_them_once_as_its_authorization(echo: str, module: Any) -> None:
    # before: "ValueError: Cannot combine AUTHORIZATION header with AUTH argument or credentials encoded in URL":
    # the client had made the URL's user:password@ its Authorization header, and aiohttp was given both (an a2a
    # target with such a url crashed reading its card)
    url = echo.replace("http://", "http://ann:pa55word@")
    async with module.AsyncClient(transport=aio_transport(module)) as client:
        answer = await client.post(url, content=b"{}")
    seen = dict(tuple(pair) for pair in answer.json())
    assert seen["authorization"] == "Basic YW5uOnBhNTV3b3Jk"  # ann:pa55word
