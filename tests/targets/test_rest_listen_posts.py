"""What an agent that calls back (`response.listen`) posts is read as an answer is: a post that says it is JSON
and is not fails the turn saying so (and is answered 400), never graded as the agent's words. Against a real
local agent posting to the listener tamesu serves."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.net.serve import ThreadServer
from tamesu.targets.rest.target import RestSpec, RestTarget

ANSWERED: list[int] = []
"""The listener's status for each post the agent made."""


async def _post_back(url: str, bodies: list[tuple[bytes, str]]) -> None:
    async with aiohttp.ClientSession() as client:
        for body, content_type in bodies:
            await asyncio.sleep(0.05)
            async with client.post(url, data=body, headers={"Content-Type": content_type}) as answered:
                ANSWERED.append(answered.status)


async def _bot(request: Request) -> JSONResponse:
    body = await request.json()
    posts = {"broken": [(b'{"text": "Your order has shipped", "tool_calls": [{"name": "lookup"', "application/json")],
             "text": [(b'{"text": "not JSON, and not said to be', "text/plain")]}[request.path_params["kind"]]
    return JSONResponse({"accepted": True}, status_code=202, background=BackgroundTask(_post_back, body["callback"],
                                                                                       posts))


@pytest.fixture
def agent_url(serve: Callable[[Any], ThreadServer]) -> str:
    return serve(Starlette(routes=[Route("/bot/{kind}", _bot, methods=["POST"])])).url


async def _send(url: str, tmp_path: Path) -> Any:
    spec = {"type": "rest", "url": url, "turn_timeout": "5s",
            "request": {"body": {"text": "{{message}}", "callback": "{{listen.url}}"}},
            "response": {"listen": {"path": "/hook", "idle": "300ms"}}}
    target = RestTarget(RestSpec.model_validate(spec), "api")
    await target.open(new_session(tmp_path))
    try:
        return await target.send(UserTurn(text="where is my order?"))
    finally:
        await target.close()


async def test_a_post_that_says_it_is_json_and_is_not_fails_the_turn(agent_url: str, tmp_path: Path) -> None:
    # was: its text, `{"text": "Your order has shipped", ...`, the turn's reply (a `contains: shipped` passed)
    ANSWERED.clear()
    with pytest.raises(TurnError) as failed:
        await _send(f"{agent_url}/bot/broken", tmp_path)
    assert str(failed.value).startswith("malformed JSON in a post to /hook (application/json): Expecting ',' "
                                        "delimiter at line 1 column 68: "), str(failed.value)
    assert failed.value.raw == '{"text": "Your order has shipped", "tool_calls": [{"name": "lookup"'
    assert ANSWERED == [400]  # the agent is told too


async def test_a_post_of_text_is_its_text(agent_url: str, tmp_path: Path) -> None:
    ANSWERED.clear()
    turn = await _send(f"{agent_url}/bot/text", tmp_path)
    assert turn.text == '{"text": "not JSON, and not said to be' and ANSWERED == [200]
