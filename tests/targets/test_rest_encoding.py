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
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import Http, text_encoding

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


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/{name}", _answer)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield f"http://127.0.0.1:{server.port}"


def _http(tmp_path: Path) -> Http:
    return Http(session=new_session(tmp_path), connect=ConnectSpec(), read_timeout=30, what="rest target",
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
