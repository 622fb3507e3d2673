"""A reply read where it is not: a stream's `response.delta`, a callback's `listen.text` or a poll's `poll.text`
that finds nothing in any JSON the agent sent is said as a JSON answer's `response.text` is (a path the suite set:
the turn fails naming the keys there; the default: a `text_not_found` event), never a turn that "said nothing"
graded against the agent. Against a real local agent that streams, calls back and answers polls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sessions import events, new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.net.serve import ThreadServer
from tamesu.targets.rest.target import RestSpec, RestTarget

SHAPES: dict[str, Callable[[str], object]] = {
    "token": lambda word: {"token": word, "index": 1},  # a stream that names its pieces its own way
    "message": lambda word: {"message": {"role": "assistant", "content": word}},  # Ollama's, without its `model`
    "empty": lambda word: {"delta": ""},  # an agent that streamed an empty reply: found, and empty
    "tools": lambda word: {"tool_calls": [{"name": "lookup", "args": {"q": word}}]},  # a turn of tool calls only
    "closing": lambda word: {"done": True},  # only the closing event: an agent that said nothing this turn
}


async def _stream(request: Request) -> StreamingResponse:
    shape = SHAPES[request.path_params["shape"]]

    async def events() -> AsyncIterator[bytes]:
        for word in ("Hel", "lo"):
            yield f"data: {json.dumps(shape(word))}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def _post_back(url: str, posts: list[dict[str, Any]]) -> None:
    async with aiohttp.ClientSession() as client:
        for post in posts:
            await asyncio.sleep(0.05)
            async with client.post(url, json=post) as answered:
                await answered.read()


async def _bot(request: Request) -> Response:
    """Takes the turn, then posts its reply to the callback url it was given, under `msg`."""
    body = await request.json()
    posts = [{"msg": f"Working on: {body['text']}"}, {"msg": "Done", "final": True}]
    return JSONResponse({"accepted": True}, status_code=202, background=BackgroundTask(_post_back, body["callback"],
                                                                                       posts))


async def _job(_: Request) -> JSONResponse:
    return JSONResponse({"job": "j1"}, status_code=202)


async def _job_state(_: Request) -> JSONResponse:
    return JSONResponse({"status": "done", "output": "Processed"})


@pytest.fixture
def agent_url(serve: Callable[[Any], ThreadServer]) -> str:
    return serve(Starlette(routes=[Route("/sse/{shape}", _stream, methods=["POST"]),
                                   Route("/bot", _bot, methods=["POST"]),
                                   Route("/jobs", _job, methods=["POST"]),
                                   Route("/jobs/{job}", _job_state, methods=["GET"])])).url


async def _send(spec: dict[str, Any], tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The turn (or the TurnError it failed with) and the session's `text_not_found` events."""
    session = new_session(tmp_path)
    target = RestTarget(RestSpec.model_validate({"type": "rest", **spec}), "api")
    await target.open(session)
    try:
        try:
            said: Any = await target.send(UserTurn(text="order pizza"))
        except TurnError as failed:
            said = failed
    finally:
        await target.close()
    return said, events(session, "text_not_found")


@pytest.mark.parametrize("streaming", ["sse", None])
async def test_a_delta_path_that_finds_nothing_in_the_stream_fails_the_turn(agent_url: str, tmp_path: Path,
                                                                            streaming: str | None) -> None:
    # was: the turn "said nothing" (""), and `contains` failed the agent with no word of where tamesu looked
    spec = {"url": f"{agent_url}/sse/token", "response": {"delta": "$.text"},
            **({"streaming": streaming} if streaming else {})}
    failed, _ = await _send(spec, tmp_path)
    assert isinstance(failed, TurnError)
    assert str(failed) == ("response.delta ($.text) found nothing in the stream's 2 events; the first's keys: token, "
                           "index: set response.delta to the field with each piece of the reply")
    assert failed.raw == [{"token": "Hel", "index": 1}, {"token": "lo", "index": 1}]


@pytest.mark.parametrize("shape", ["token", "message"])
async def test_a_stream_whose_text_is_nowhere_known_is_said_when_no_path_was_set(agent_url: str, tmp_path: Path,
                                                                                 shape: str) -> None:
    turn, [said] = await _send({"url": f"{agent_url}/sse/{shape}", "streaming": "sse"}, tmp_path)
    assert turn.text == "" and len(turn.raw) == 2
    keys = "token, index" if shape == "token" else "message"
    assert said["path"] == "$.delta"
    assert said["note"] == (f"response.delta is not set and found nothing in the stream's 2 events (at $.delta, "
                            f"$.text, nor where OpenAI's, Anthropic's or Ollama's streams put text); the first's "
                            f"keys: {keys}")


@pytest.mark.parametrize("shape", ["empty", "tools", "closing"])
@pytest.mark.parametrize("delta", [None, "$.delta"])
async def test_a_stream_that_said_nothing_where_it_was_looked_for_is_no_missing_text(agent_url: str, tmp_path: Path,
                                                                                     shape: str,
                                                                                     delta: str | None) -> None:
    spec = {"url": f"{agent_url}/sse/{shape}", "streaming": "sse", **({"response": {"delta": delta}} if delta else {})}
    turn, said = await _send(spec, tmp_path)
    assert turn.text == "" and said == []
    assert [call.name for call in turn.tool_calls] == (["lookup", "lookup"] if shape == "tools" else [])


async def test_a_listen_text_that_finds_nothing_in_the_posts(agent_url: str, tmp_path: Path) -> None:
    listen = {"path": "/hook", "idle": "2s", "done": "$.final"}
    spec = {"url": f"{agent_url}/bot", "request": {"body": {"text": "{{message}}", "callback": "{{listen.url}}"}},
            "response": {"listen": {**listen, "text": "$.reply"}}}
    failed, _ = await _send(spec, tmp_path)
    assert isinstance(failed, TurnError)
    assert str(failed) == ("response.listen.text ($.reply) found nothing in the agent's 2 posts; the first's keys: "
                           "msg: set response.listen.text to the field with the reply")
    assert failed.raw == [{"msg": "Working on: order pizza"}, {"msg": "Done", "final": True}]
    spec["response"] = {"listen": listen}
    turn, [said] = await _send(spec, tmp_path)
    assert turn.text == "" and said["path"] == "$.text"
    assert said["note"] == ("response.listen.text ($.text) found nothing in the agent's 2 posts; the first's keys: "
                            "msg")


async def test_a_poll_text_that_finds_nothing_in_the_answer_that_is_done(agent_url: str, tmp_path: Path) -> None:
    poll = {"url": "/jobs/{{response.job}}", "interval": "50ms", "done": {"path": "$.status", "equals": "done"}}
    failed, _ = await _send({"url": f"{agent_url}/jobs", "response": {"poll": {**poll, "text": "$.reply"}}},
                            tmp_path)
    assert isinstance(failed, TurnError)
    assert str(failed) == ("response.poll.text ($.reply) found nothing in the poll's answer; its keys: status, "
                           "output: set response.poll.text to the field with the reply")
    turn, [said] = await _send({"url": f"{agent_url}/jobs", "response": {"poll": poll}}, tmp_path)
    assert turn.text == "" and said["note"] == ("response.poll.text ($.text) found nothing in the poll's answer; "
                                                "its keys: status, output")
