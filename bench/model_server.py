"""A model server for the benchmark, in a process of its own so its CPU never counts as tamesu's.

    python bench/model_server.py

Answers at once, in both shapes: OpenAI chat completions (`POST /v1/chat/completions`) and Anthropic Messages
(`POST /v1/messages`). Every answer is a simulated user's next message as JSON (what tamesu's simulator asks
for), so a persona keeps talking until the test's `max_turns`. `GET /count` says how many completions it
served, so the benchmark can check that every conversation made exactly its share of model calls.
It prints `listening on http://127.0.0.1:PORT` once ready.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agents import serve_forever

ANSWER = json.dumps({"input": "Where is my order?", "goal_achieved": False, "stop": False,
                     "stop_when_met": False, "reasoning": "keep asking"})
served = {"openai": 0, "anthropic": 0}


async def openai_chat(request: web.Request) -> web.Response:
    body = await request.json()
    served["openai"] += 1
    return web.json_response({
        "id": f"chatcmpl-{served['openai']}", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", "bench"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": ANSWER}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}})


async def anthropic_messages(request: web.Request) -> web.Response:
    body = await request.json()
    served["anthropic"] += 1
    return web.json_response({
        "id": f"msg_{served['anthropic']}", "type": "message", "role": "assistant",
        "model": body.get("model", "bench"), "stop_reason": "end_turn", "stop_sequence": None,
        "content": [{"type": "text", "text": ANSWER}],
        "usage": {"input_tokens": 50, "output_tokens": 12}})


async def count(_: web.Request) -> web.Response:
    return web.json_response(served)


async def models(_: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})


def main() -> None:
    serve_forever([("POST", "/v1/chat/completions", openai_chat), ("POST", "/v1/messages", anthropic_messages),
                   ("GET", "/v1/models", models), ("GET", "/count", count)])


if __name__ == "__main__":
    main()
