"""An agent that relays Ollama's answers: tool calls in the shapes Ollama sends them are read without settings.

Ollama's OpenAI-compatible endpoint (`/v1/chat/completions`) streams each tool call whole in one chunk, its
arguments a complete JSON string, with an `id` of its own and an `index` that older Ollama versions left 0 for
every call (each call then comes in a chunk of its own); its native `/api/chat` streams newline-delimited JSON whose
`message.tool_calls` hold each call whole, the arguments an object, and answers so too with `stream: false`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tamesu.net.serve import ThreadServer

PARIS, ROME = {"city": "Paris"}, {"city": "Rome"}


def _v1_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-417", "object": "chat.completion.chunk", "created": 1733500000, "model": "llama3.2",
            "system_fingerprint": "fp_ollama", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _v1_call(call_id: str, index: int, arguments: object) -> dict[str, Any]:
    return {"id": call_id, "index": index, "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}


def _native(message: dict[str, Any], done: bool) -> dict[str, Any]:
    extra = {"done_reason": "stop", "total_duration": 885095291, "eval_count": 31} if done else {}
    return {"model": "llama3.2", "created_at": "2026-12-06T17:00:00.000000Z",
            "message": {"role": "assistant", "content": "", **message}, "done": done, **extra}


def _native_calls() -> list[dict[str, Any]]:
    return [{"function": {"name": "get_weather", "arguments": PARIS}},
            {"function": {"name": "get_weather", "arguments": ROME}}]


def ollama_relay() -> Starlette:
    """`/v1/{shape}`: Ollama's OpenAI-compatible chunks; `/api/chat` its native stream; `/api/answer` its native
    answer with `stream: false`."""

    async def v1(request: Request) -> StreamingResponse:
        shape = request.path_params["shape"]
        if shape == "one-chunk":  # both calls whole in one chunk, indexed 0 and 1
            chunks = [_v1_chunk({"role": "assistant", "content": "", "tool_calls": [
                _v1_call("call_a1", 0, json.dumps(PARIS)), _v1_call("call_b2", 1, json.dumps(ROME))]})]
        elif shape == "own-chunks":  # each call in a chunk of its own, both at index 0 (older Ollama)
            chunks = [_v1_chunk({"role": "assistant", "content": "",
                                 "tool_calls": [_v1_call("call_a1", 0, json.dumps(PARIS))]}),
                      _v1_chunk({"role": "assistant", "content": "",
                                 "tool_calls": [_v1_call("call_b2", 0, json.dumps(ROME))]})]
        else:  # the arguments whole as an object, not a JSON string
            chunks = [_v1_chunk({"role": "assistant", "content": "",
                                 "tool_calls": [_v1_call("call_a1", 0, PARIS), _v1_call("call_b2", 1, ROME)]})]
        chunks.append(_v1_chunk({"role": "assistant", "content": ""}, finish="tool_calls"))

        async def events() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def native_stream(request: Request) -> StreamingResponse:
        async def lines() -> AsyncIterator[bytes]:
            yield (json.dumps(_native({"tool_calls": _native_calls()}, done=False)) + "\n").encode()
            yield (json.dumps(_native({}, done=True)) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def native_answer(request: Request) -> Response:
        return JSONResponse(_native({"tool_calls": _native_calls()}, done=True))

    return Starlette(routes=[Route("/v1/{shape}", v1, methods=["POST"]),
                             Route("/api/chat", native_stream, methods=["POST"]),
                             Route("/api/answer", native_answer, methods=["POST"])])


def test_ollamas_tool_calls_are_assembled_in_every_shape_it_sends(tmp_path: Path, tamesu: Any,
                                                                  serve: Callable[[Any], ThreadServer]) -> None:
    url = serve(ollama_relay()).url
    targets = {"one_chunk": "/v1/one-chunk", "own_chunks": "/v1/own-chunks", "object_arguments": "/v1/objects",
               "native_stream": "/api/chat", "native_answer": "/api/answer"}
    tests = "".join(
        f"  - {{ name: {name}, target: {name}, scenario: {{ script: [ {{ say: 'weather in Paris and Rome?' }} ] }},\n"
        "      assert: [ { tool_called: { name: get_weather, args: { city: Paris } } },\n"
        "                { tool_called: { name: get_weather, args: { city: Rome } } },\n"
        "                { tool_sequence: { calls: [ get_weather, get_weather ], strict: true } } ] }\n"
        for name in targets)
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n" + "".join(f"  {name}: {{ type: rest, url: '{url}{path}' }}\n" for name, path in targets.items())
        + f"tests:\n{tests}")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_model_target_on_ollamas_openai_endpoint_reads_its_tool_calls(tmp_path: Path, tamesu: Any,
                                                                        serve: Callable[[Any], ThreadServer]) -> None:
    # the model providers never ask for a stream (stream_tools is the rest target's, for an agent relaying one):
    # what reaches a model target from Ollama is its whole answer, each call with an `index` and its own `id`
    from model_servers import OpenAIServer, raw, text

    calls = [_v1_call("call_a1", 0, json.dumps(PARIS)), _v1_call("call_b2", 1, json.dumps(ROME))]
    ollama = OpenAIServer()
    ollama.plan(raw({"id": "chatcmpl-417", "object": "chat.completion", "created": 1733500000, "model": "llama3.2",
                     "system_fingerprint": "fp_ollama",
                     "choices": [{"index": 0, "finish_reason": "tool_calls",
                                  "message": {"role": "assistant", "content": "", "tool_calls": calls}}],
                     "usage": {"prompt_tokens": 80, "completion_tokens": 31, "total_tokens": 111}}),
                text("Sunny in both."))
    url = ollama.base_url(serve(ollama.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        f"cache: {{ mode: off }}\nmodels:\n  target: {{ provider: openai, model: llama3.2, base_url: '{url}' }}\n")
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  llm: { type: model, tools: [ { name: get_weather, result: sunny,
                                 parameters: { type: object, properties: { city: { type: string } } } } ] }
tests:
  - name: weather
    target: llm
    scenario: { script: [ { say: 'weather in Paris and Rome?' } ] }
    assert: [ { tool_called: { name: get_weather, args: { city: Paris } } },
              { tool_called: { name: get_weather, args: { city: Rome } } }, { contains: Sunny } ]
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # asked for whole answers: Ollama's /v1 streams only when a request says `stream: true`
    assert [call.body.get("stream") for call in ollama.calls()] == [None, None]
    # each result went back under the id Ollama gave its call
    answered = [m.get("tool_call_id") for m in ollama.calls()[1].body["messages"] if m["role"] == "tool"]
    assert answered == ["call_a1", "call_b2"], answered
