"""An answer that says it is an event stream (`text/event-stream`) and is not one, against a real server on
127.0.0.1: the agent's words are not graded as nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import AgentTurn, TurnError, UserTurn
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.target import RestTarget

BODIES = {
    "json": '{"text": "Your order shipped."}',  # an Express route that set the SSE header, then res.json()
    "comments": ": keep-alive\n\n: keep-alive\n\n",  # a stream that sent no event: nothing said, no fault
}


async def _answer(request: web.Request) -> web.StreamResponse:
    return web.Response(text=BODIES[request.match_info["name"]], content_type="text/event-stream")


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/{name}", _answer)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield f"http://127.0.0.1:{server.port}"


async def _turn(url: str, tmp_path: Path, **keys: object) -> AgentTurn:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": url, **keys}), "shop")
    await target.open(new_session(tmp_path))
    try:
        return await target.send(UserTurn(text="where is my order?"))
    finally:
        await target.close()


@pytest.mark.parametrize("streaming", ["sse", None])
async def test_a_json_answer_labelled_as_an_event_stream_is_said_so(streaming: str | None, agent: str,
                                                                   tmp_path: Path) -> None:
    # before: no event came, and the turn was the agent saying nothing ('the agent said nothing in 1 turn(s)')
    keys = {"streaming": streaming} if streaming else {}
    with pytest.raises(TurnError) as caught:
        await _turn(f"{agent}/json", tmp_path, **keys)
    assert str(caught.value) == (
        'the agent answered text/event-stream, but its body is no event stream (no data: line; it began: {"text": '
        '"Your order shipped."}): is it a JSON or text answer sent with the wrong content type?')
    assert caught.value.status == 200


async def test_a_stream_of_comments_alone_says_nothing(agent: str, tmp_path: Path) -> None:
    turn = await _turn(f"{agent}/comments", tmp_path, streaming="sse")
    assert turn.text == "" and turn.raw == []
