"""A stream whose chunks are read at a `response.delta` of the suite's and whose closing event (`response.final`)
holds the whole reply at that path too, against a real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.target import RestTarget

STREAMS = {
    # a typed stream whose `end` event repeats the reply, as many agents' closing events do
    "repeats": [{"type": "delta", "text": "Your order"}, {"type": "delta", "text": " shipped."},
                {"type": "end", "text": "Your order shipped."}],
    # one whose `end` event brings the last piece
    "last-piece": [{"type": "delta", "text": "Your order"}, {"type": "end", "text": " shipped."}],
}


async def _stream(request: web.Request) -> web.StreamResponse:
    answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await answer.prepare(request)
    for event in STREAMS[request.match_info["name"]]:
        await answer.write(f"data: {json.dumps(event)}\n\n".encode())
    return answer


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/{name}", _stream)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield f"http://127.0.0.1:{server.port}"


@pytest.mark.parametrize("name", list(STREAMS))
async def test_a_closing_event_that_repeats_the_reply_at_the_delta_is_the_reply(name: str, agent: str,
                                                                             tmp_path: Path) -> None:
    # before: with response.delta set, 'Your order shipped.Your order shipped.': the closing event's repeat was
    # one more chunk (with delta unset it replaced the chunks, as the rest target documents)
    spec = RestSpec.model_validate({"type": "rest", "url": f"{agent}/{name}", "streaming": "sse",
                                    "response": {"delta": "$.text", "final": {"path": "$.type", "equals": "end"}}})
    target = RestTarget(spec, "shop")
    await target.open(new_session(tmp_path))
    try:
        turn = await target.send(UserTurn(text="where is my order?"))
    finally:
        await target.close()
    assert turn.text == "Your order shipped."
