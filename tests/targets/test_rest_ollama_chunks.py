"""Ollama-style stream chunks that leave out `model` (a relay, a proxy, an agent that streams its own words as Ollama
shapes them: `{"message": {"role": "assistant", "content": ...}, "done": false}`) are read as Ollama's, in
newline-delimited JSON and in SSE, against a real local agent; a chunk that is only a `message` (no `done`) is
not, its shape being no one's in particular."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from sessions import events, new_session
from tamesu.conversation import UserTurn
from tamesu.net.serve import ThreadServer
from tamesu.targets.rest.target import RestSpec, RestTarget


def _chunks(said: str) -> list[dict[str, Any]]:
    words = [word if not at else f" {word}" for at, word in enumerate(said.split())]
    return [*({"message": {"role": "assistant", "content": word}, "done": False} for word in words),
            {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}]


async def _stream(request: Request) -> StreamingResponse:
    said = f"You said {(await request.json())['message']}"

    async def lines() -> AsyncIterator[bytes]:
        for chunk in _chunks(said):
            yield (f"data: {json.dumps(chunk)}\n\n" if request.path_params["as"] == "sse" else
                   f"{json.dumps(chunk)}\n").encode()

    media = "text/event-stream" if request.path_params["as"] == "sse" else "application/x-ndjson"
    return StreamingResponse(lines(), media_type=media)


@pytest.fixture
def agent_url(serve: Callable[[Any], ThreadServer]) -> str:
    return serve(Starlette(routes=[Route("/chat/{as}", _stream, methods=["POST"])])).url


@pytest.mark.parametrize("way", ["ndjson", "sse"])
async def test_ollama_chunks_without_their_model_are_read_as_ollamas(agent_url: str, tmp_path: Path,
                                                                     way: str) -> None:
    # before: the turn said nothing, a `text_not_found` event ("the first's keys: message, done"): only a chunk that
    # named its `model` was taken as Ollama's
    session = new_session(tmp_path)
    spec = {"url": f"{agent_url}/chat/{way}", **({"streaming": "sse"} if way == "sse" else {})}
    target = RestTarget(RestSpec.model_validate({"type": "rest", **spec}), "api")
    await target.open(session)
    try:
        turn = await target.send(UserTurn(text="hello there"))
    finally:
        await target.close()
    assert turn.text == "You said hello there"
    assert len(turn.raw) == 5 and turn.response["done"] is True
    [detected] = events(session, "text_detected")
    assert detected["path"] == "$.message.content"
    assert events(session, "text_not_found") == []
