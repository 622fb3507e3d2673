"""The voice bot's "model": a small scripted OpenAI-compatible chat-completions server (SSE streaming), so the
bot runs offline. Its rules, tried on the last message in order:

- a tool result (`role: tool`): it reads the result back ("The weather in Paris is sunny, 21 degrees.");
- the caller pressed 2 (pipecat's DTMF aggregator says "DTMF: 2") or said billing: "You chose billing. Your
  balance is forty two dollars.";
- weather: it calls the client-side tool `get_weather` with the city it heard (Paris when none);
- story / tell me about: a long answer (several sentences, so a caller can talk over it);
- table / book / people: "I can book a table for you. For how many people?";
- anything else: "Sorry, I can help with the weather, billing or a table."

    server = await start_chat_model()      # aiohttp on 127.0.0.1, a free port
    server.base_url                         # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

LONG = ("Our city has a long history. It began as a small fishing village by the river, and over the centuries "
        "it grew into a busy market town. The old bridge was built of stone, and the cathedral took two "
        "hundred years to finish. Today people come to walk by the water, visit the museums, and eat in the "
        "little restaurants of the old town.")
CITIES = ("paris", "london", "berlin", "madrid", "rome", "tokyo")


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def reply_for(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """(text, tool call or None) for the conversation so far."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        try:
            result = json.loads(_text_of(last))
        except ValueError:
            result = {"summary": _text_of(last)}
        if isinstance(result, dict) and "summary" in result:
            return f"The weather is {result['summary']}.", None
        return f"The weather service says {_text_of(last)}.", None
    users = [m for m in messages if m.get("role") == "user"]
    said = _text_of(users[-1]).lower() if users else ""
    if re.search(r"dtmf:\s*2|\bbilling\b", said):
        return "You chose billing. Your balance is forty two dollars.", None
    if "weather" in said:
        city = next((c for c in CITIES if c in said), "paris")
        return "", {"name": "get_weather", "arguments": {"city": city.title()}}
    if "story" in said or "tell me about" in said:
        return LONG, None
    if "table" in said or "book" in said or "people" in said:  # a loaded bot's STT may lose the first words
        return "I can book a table for you. For how many people?", None
    return "Sorry, I can help with the weather, billing or a table.", None


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


async def _complete(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    model = str(body.get("model", "scripted"))
    text, call = reply_for(body.get("messages") or [])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    await response.write(_chunk(model, {"role": "assistant", "content": ""}))
    if call is not None:
        tool = {"index": 0, "id": "call_" + uuid.uuid4().hex[:10], "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
        await response.write(_chunk(model, {"tool_calls": [tool]}))
        await response.write(_chunk(model, {}, "tool_calls"))
    else:
        for word in re.findall(r"\S+\s*", text):  # streamed a word at a time, as a model does
            await response.write(_chunk(model, {"content": word}))
        await response.write(_chunk(model, {}, "stop"))
    await response.write(b"data: [DONE]\n\n")
    return response


@dataclass
class ChatModel:
    runner: web.AppRunner
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_chat_model(port: int = 0) -> ChatModel:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _complete)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # the port picked when 0
    return ChatModel(runner, int(bound))
