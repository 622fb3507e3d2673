"""`{{ui_messages}}` is kept only by a rest target one of whose templates names it: a conversation kept as the AI
SDK's UI messages cost every turn about 8 calls, for the few agents that read it (issue 28). A target that names it
sends what it sent before, turn after turn; one that does not keeps none and reads the UI message stream as before.
Against a real agent on 127.0.0.1 that answers a UI message stream and records what it received."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import AgentTurn, UserTurn
from tamesu.targets.rest import ui_stream
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.target import RestTarget

STREAM = [{"type": "start"}, {"type": "start-step"},
          {"type": "tool-input-available", "toolCallId": "c1", "toolName": "lookup", "input": {"id": "ORD-7"}},
          {"type": "tool-output-available", "toolCallId": "c1", "output": {"status": "shipped"}},
          {"type": "text-start", "id": "t1"}, {"type": "text-delta", "id": "t1", "delta": "It shipped."},
          {"type": "text-end", "id": "t1"}, {"type": "finish-step"}, {"type": "finish"}]


@pytest.fixture
async def agent() -> AsyncIterator[tuple[str, list[Any]]]:
    received: list[Any] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        received.append({"body": await request.json(), "header": request.headers.get("X-Messages")})
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream", ui_stream.MARK: "v1"})
        await answer.prepare(request)
        for event in STREAM:
            await answer.write(f"data: {json.dumps(event)}\n\n".encode())
        await answer.write(b"data: [DONE]\n\n")
        return answer

    app = web.Application()
    app.router.add_post("/chat", chat)
    async with TestServer(app, host="127.0.0.1") as server:
        yield f"http://127.0.0.1:{server.port}/chat", received


async def _talk(spec: dict[str, Any], tmp_path: Path, variables: dict[str, Any] | None = None) -> list[AgentTurn]:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "streaming": "sse", **spec}), "shop")
    await target.open(new_session(tmp_path, vars=variables))
    try:
        return [await target.send(UserTurn(text=said)) for said in ("where is ORD-7?", "thanks")]
    finally:
        await target.close()


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = ui_stream.ui_message
    monkeypatch.setattr(ui_stream, "ui_message", lambda number, role, parts: made.append(role) or
                        real(number, role, parts))
    return made


ASSISTANT = {"id": "tamesu-2", "role": "assistant", "parts": [
    {"type": "step-start"},
    {"type": "tool-lookup", "toolCallId": "c1", "state": "output-available", "input": {"id": "ORD-7"},
     "output": {"status": "shipped"}},
    {"type": "text", "text": "It shipped.", "state": "done"}]}


@pytest.mark.parametrize("where", ["body", "header", "var"])
async def test_a_target_that_names_ui_messages_sends_the_conversation_as_before(
        where: str, agent: tuple[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a var holding it is rendered with the turn's values (`{{vars.history}}` in the body): named too
    url, received = agent
    made = _counted(monkeypatch)
    body = {"body": {"messages": "{{vars.history}}" if where == "var" else "{{ui_messages}}"}}
    spec: dict[str, Any] = {"url": url, "headers": {"X-Messages": "{{ ui_messages }}"}} if where == "header" \
        else {"url": url, "request": body}
    turns = await _talk(spec, tmp_path, {"history": "{{ui_messages}}", "shop": "ORD"})
    assert [turn.text for turn in turns] == ["It shipped.", "It shipped."]
    sent = [json.loads(entry["header"]) if where == "header" else entry["body"]["messages"] for entry in received]
    first = {"id": "tamesu-1", "role": "user", "parts": [{"type": "text", "text": "where is ORD-7?"}]}
    assert sent == [[first], [first, ASSISTANT,
                              {"id": "tamesu-3", "role": "user", "parts": [{"type": "text", "text": "thanks"}]}]]
    assert made == ["user", "assistant", "user", "assistant"]


async def test_a_target_that_never_names_ui_messages_keeps_none(agent: tuple[str, list[Any]], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # before: the conversation was kept as UI messages every turn (two made, about 8 calls), and never sent
    url, received = agent
    made = _counted(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the spec read for the name says nothing (pydantic warned of `final`)
        turns = await _talk({"url": url, "request": {"body": {"text": "{{message}}", "history": "{{messages}}",
                                                              "shop": "{{vars.shop}}"}},
                             "response": {"final": {"path": "$.type", "equals": "finish"}}}, tmp_path,
                            {"shop": "ORD", "unused": "{{ui_messages}}"})
    assert made == []
    # the UI message stream still read by its types: the reply, the tool call with its result
    assert [turn.text for turn in turns] == ["It shipped.", "It shipped."]
    assert [(call.name, call.args, call.result) for call in turns[0].tool_calls] == [
        ("lookup", {"id": "ORD-7"}, {"status": "shipped"})]
    assert [len(entry["body"]["history"]) for entry in received] == [1, 3]
