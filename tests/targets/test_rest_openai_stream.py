"""An agent served as OpenAI's chat API (vLLM, LiteLLM, agent servers that speak it): with nothing set, the rest
target reads a stream of `chat.completion.chunk` events at `choices[0].delta.content` (and says so once), and an
answer's tool calls at `choices[0].message.tool_calls`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tamesu.net.serve import ThreadServer


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "agent",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def openai_streaming_agent() -> Starlette:
    async def completions(request: Request) -> StreamingResponse:
        said = (await request.json())["message"]

        async def events() -> AsyncIterator[bytes]:
            yield _chunk({"role": "assistant", "content": ""})
            yield _chunk({"reasoning_content": "the user greets me; "})  # a reasoning model's thinking: not the reply
            for word in ("You ", "said: ", said):
                yield _chunk({"content": word})
            if "ORD" in said:  # a tool call in fragments: the name, then the arguments' JSON in pieces
                yield _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                              "function": {"name": "lookup_order", "arguments": ""}}]})
                for piece in ('{"id": ', '"ORD-7"}'):
                    yield _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield _chunk({}, finish="stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def answered(request: Request) -> JSONResponse:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "lookup_order", "arguments": json.dumps({"id": "ORD-7"})}}
        return JSONResponse({"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": "Looking it up", "tool_calls": [call]}}]})

    async def responses(request: Request) -> StreamingResponse:
        said = (await request.json())["message"]
        call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup_order",
                "arguments": json.dumps({"id": "ORD-7"})}
        typed = [{"type": "response.created"}, {"type": "response.reasoning_summary_text.delta", "delta": "hm, "},
                 {"type": "response.output_item.added", "item": {**call, "arguments": ""}},
                 {"type": "response.function_call_arguments.delta", "delta": "{\"id\""},
                 {"type": "response.output_item.done", "item": call},
                 {"type": "response.output_text.delta", "delta": "You said: "},
                 {"type": "response.output_text.delta", "delta": said},
                 # the closing events repeat the whole text
                 {"type": "response.output_text.done", "text": f"You said: {said}"},
                 {"type": "response.completed", "response": {"status": "completed"}}]
        return _stream(typed)

    async def messages(request: Request) -> StreamingResponse:
        said = (await request.json())["message"]
        typed = [{"type": "message_start"},
                 {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
                 {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "You said: "}},
                 {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": said}},
                 {"type": "content_block_start", "index": 2,
                  "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {}}},
                 {"type": "content_block_delta", "index": 2,
                  "delta": {"type": "input_json_delta", "partial_json": "{\"id\": \"OR"}},
                 {"type": "content_block_delta", "index": 2,
                  "delta": {"type": "input_json_delta", "partial_json": "D-7\"}"}},
                 {"type": "content_block_stop", "index": 2},
                 # every Messages stream ends so: a delta object without text
                 {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                  "usage": {"output_tokens": 9}},
                 {"type": "message_stop"}]
        return _stream(typed)

    async def anthropic_answered(request: Request) -> JSONResponse:
        blocks = [{"type": "thinking", "thinking": "an order question"}, {"type": "text", "text": "Looking it up"},
                  {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"id": "ORD-7"}}]
        return JSONResponse({"type": "message", "role": "assistant", "content": blocks, "stop_reason": "tool_use"})

    return Starlette(routes=[Route("/v1/chat", completions, methods=["POST"]),
                             Route("/v1/answer", answered, methods=["POST"]),
                             Route("/v1/anthropic-answer", anthropic_answered, methods=["POST"]),
                             Route("/v1/responses", responses, methods=["POST"]),
                             Route("/v1/messages", messages, methods=["POST"])])


def _stream(events: list[dict[str, Any]]) -> StreamingResponse:
    async def sent() -> AsyncIterator[bytes]:
        for event in events:
            yield f"data: {json.dumps(event)}\n\n".encode()

    return StreamingResponse(sent(), media_type="text/event-stream")


def test_openai_style_chunks_are_read_without_settings(tmp_path: Path, tamesu: Any,
                                                       serve: Callable[[Any], ThreadServer]) -> None:
    # before: the chunks have no $.delta, so every turn read as empty: "the agent said nothing"
    url = serve(openai_streaming_agent()).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{url}/v1/chat" }}
tests:
  - name: greets
    target: bot
    scenario: {{ script: [ {{ say: hello }}, {{ say: again }} ] }}
    assert: [ {{ equals: "You said: hello", on_turn: 1 }}, {{ equals: "You said: again", on_turn: 2 }} ]
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    detected = [e["data"] for e in result["events"] if e["name"] == "text_detected"]
    assert [d["path"] for d in detected] == ["$.choices[0].delta.content"]  # said once, not per turn
    assert ("along the way: 1 reply field guessed (response.text or response.delta not set) (text_detected, 1 test)"
            in done.stdout)


@pytest.mark.parametrize("path", ["answer", "anthropic-answer"])
def test_an_openai_or_anthropic_shaped_answers_tool_calls_are_read_without_settings(
        path: str, tmp_path: Path, tamesu: Any, serve: Callable[[Any], ThreadServer]) -> None:
    # before: $.tool_calls found nothing, so tool_called failed on an agent that called the tool; an Anthropic
    # shaped answer's text was not found either
    url = serve(openai_streaming_agent()).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{url}/v1/{path}" }}
tests:
  - name: looks up
    target: bot
    scenario: {{ script: [ {{ say: "where is ORD-7" }} ] }}
    assert: [ {{ equals: "Looking it up" }}, {{ tool_called: {{ name: lookup_order, args: {{ id: ORD-7 }} }} }} ]
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_typed_streams_give_their_text_never_their_reasoning(tmp_path: Path, tamesu: Any,
                                                              serve: Callable[[Any], ThreadServer]) -> None:
    # OpenAI's Responses events and Anthropic's Messages events, relayed by an agent: before, the reasoning
    # summary's delta was read into the reply, and Anthropic's blocks were read as JSON text; then the closing
    # message_delta's stop reason was added to the reply as JSON, the Responses' output_text.done repeated the
    # reply, and the tool calls each of the three streams told in pieces were never seen (tool_not_called passed)
    url = serve(openai_streaming_agent()).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  responses: {{ type: rest, url: "{url}/v1/responses" }}
  messages: {{ type: rest, url: "{url}/v1/messages" }}
  chunks: {{ type: rest, url: "{url}/v1/chat" }}
tests:
  - {{ name: responses, target: responses, scenario: {{ script: [ {{ say: hi }} ] }},
      assert: [ {{ equals: "You said: hi" }}, {{ tool_called: {{ name: lookup_order, args: {{ id: ORD-7 }} }} }} ] }}
  - {{ name: messages, target: messages, scenario: {{ script: [ {{ say: hi }} ] }},
      assert: [ {{ equals: "You said: hi" }}, {{ tool_called: {{ name: lookup_order, args: {{ id: ORD-7 }} }} }} ] }}
  - {{ name: chunks, target: chunks, scenario: {{ script: [ {{ say: "where is ORD-7" }} ] }},
      assert: [ {{ equals: "You said: where is ORD-7" }},
                {{ tool_called: {{ name: lookup_order, args: {{ id: ORD-7 }} }} }} ] }}
  - {{ name: no call, target: chunks, scenario: {{ script: [ {{ say: "hello" }} ] }},
      assert: [ {{ tool_not_called: lookup_order }} ] }}
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
