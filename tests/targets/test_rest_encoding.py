"""The rest target decodes an answer by its charset as httpx would (`targets.rest.http.text_encoding`, httpx's
rule without httpx: its parse is skipped for a content type that names no charset), against a real server on
127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import Http, text_encoding
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.target import RestTarget

ANSWERS: dict[str, tuple[str | None, bytes, object]] = {
    # path: (content type, body, the body the turn should read)
    "plain": ("text/plain", "café".encode(), "café"),
    "latin": ("text/plain; charset=ISO-8859-1", "café".encode("latin-1"), "café"),
    "quoted": ('text/plain; Charset="latin-1"', "naïve".encode("latin-1"), "naïve"),
    "unknown": ("text/plain; charset=made-up", "café".encode(), "café"),
    "json": ("application/json", '{"text": "é"}'.encode(), {"text": "é"}),
    "json-utf8": ("application/json; charset=utf-8", '{"text": "ü"}'.encode(), {"text": "ü"}),
    "none": (None, b"ok", "ok"),
}


async def _answer(request: web.Request) -> web.StreamResponse:
    content_type, body, _ = ANSWERS[request.match_info["name"]]
    answer = web.Response(body=body)
    if content_type is None:
        answer.headers.popall("Content-Type", None)
        answer.content_type = ""
    else:
        answer.headers["Content-Type"] = content_type
    return answer


BROTLI_OF_A_REPLY = bytes([0x8B, 0x07, 0x80, 0x7B, 0x22, 0x74, 0x22, 0x3A, 0x31, 0x7D, 0x03])
"""`{"t":1}` as brotli writes it, uncompressed blocks: what a server sends though it was asked for gzip or deflate."""


async def _compressed(request: web.Request) -> web.StreamResponse:
    return web.Response(body=BROTLI_OF_A_REPLY, headers={"Content-Type": request.query.get("type", "application/json"),
                                                         "Content-Encoding": request.match_info["coding"]})


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/{name}", _answer)
    app.router.add_get("/compressed/{coding}", _compressed)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield f"http://127.0.0.1:{server.port}"


def _http(tmp_path: Path) -> Http:
    return Http(session=new_session(tmp_path), connect=ConnectSpec(), pool_timeout=30, what="rest target",
                max_bytes=1_000_000)


@pytest.mark.parametrize("name", list(ANSWERS))
async def test_an_answer_is_decoded_by_its_charset_as_httpx_decodes_it(name: str, agent: str, tmp_path: Path) -> None:
    http = _http(tmp_path)
    try:
        async with httpx.AsyncClient() as plain:  # httpx's own reading of the same answer
            response = await plain.get(f"{agent}/{name}")
        assert text_encoding(response.headers) == (response.encoding or "utf-8")
        answer = await http.fetch(http.build("GET", f"{agent}/{name}", {}, None, has_body=False))
        assert answer.body == ANSWERS[name][2]
    finally:
        await http.aclose()


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "text/event-stream"])
async def test_an_answer_compressed_in_a_coding_not_asked_for_is_said_so(content_type: str, agent: str,
                                                                        tmp_path: Path) -> None:
    # before: its bytes were read as they came: 'malformed JSON in the answer (application/json): Expecting value
    # at line 1 column 1: \ufffd\ufffd{"t":1}\x03', or as text, the reply graded, as the agent's words
    target = RestTarget(RestSpec(type="rest", url=f"{agent}/compressed/br?type={content_type}", method="GET"), "shop")
    session = new_session(tmp_path)
    await target.open(session)
    try:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="hi"))
    finally:
        await target.close()
    assert str(caught.value) == ("the answer is compressed with br (Content-Encoding), which tamesu does not read "
                                 "and did not ask for (Accept-Encoding: gzip, deflate): the agent's server ignored it")
