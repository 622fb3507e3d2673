"""The baseline of the persona workload: the same model and agent calls as tamesu makes, by a bare loop.

    python bench/persona_baseline.py MODEL_URL AGENT_URL SHAPE CONVERSATIONS TURNS CONCURRENCY [CLIENT]

SHAPE is `openai` or `anthropic`. Each turn asks the model for the user's next message (a prompt of the
same size as tamesu's simulator prompt, the conversation so far, a JSON schema), reads the JSON answer and
sends it to the agent. One client per conversation for each server (the fast way with httpx, see DESIGN.md),
the SSL context built once. CLIENT is `httpx` (the default) or `aiohttp` (a `ClientSession` per conversation
per server: the floor of issue 28's goals). Prints the number of turns that worked.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import uuid
from pathlib import Path

import httpx

PROMPT = (Path(__file__).resolve().parent.parent / "src" / "tamesu" / "roles" / "prompts" /
          "simulator.v2.md").read_text(encoding="utf-8")
SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}, "goal_achieved": {"type": "boolean"},
                                           "stop": {"type": "boolean"}, "stop_when_met": {"type": "boolean"},
                                           "reasoning": {"type": "string"}}, "required": ["input"]}


def model_request(shape: str, history: list[str]) -> tuple[str, dict[str, object]]:
    user = "\n".join(history) or "(the conversation has not started)"
    if shape == "anthropic":
        return "/v1/messages", {"model": "bench", "max_tokens": 1024, "system": PROMPT,
                                "messages": [{"role": "user", "content": user}]}
    return "/v1/chat/completions", {
        "model": "bench", "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": user}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}}


def answer_text(shape: str, body: dict[str, object]) -> str:
    if shape == "anthropic":
        return body["content"][0]["text"]  # type: ignore[index]
    return body["choices"][0]["message"]["content"]  # type: ignore[index]


async def conversation(model_url: str, agent_url: str, shape: str, turns: int, context: ssl.SSLContext) -> int:
    session = uuid.uuid4().hex
    history: list[str] = []
    ok = 0
    async with httpx.AsyncClient(timeout=600, verify=context) as model, \
            httpx.AsyncClient(timeout=600, verify=context) as agent:
        for _ in range(turns):
            path, body = model_request(shape, history)
            said = json.loads(answer_text(shape, (await model.post(model_url + path, json=body)).json()))["input"]
            history.append(f"user: {said}")
            reply = await agent.post(agent_url, json={"message": said, "session_id": session})
            text = reply.json()["text"]
            history.append(f"agent: {text}")
            ok += reply.status_code == 200 and "echo" in text
    return ok


async def aiohttp_conversation(model_url: str, agent_url: str, shape: str, turns: int, context: ssl.SSLContext) -> int:
    import aiohttp

    session = uuid.uuid4().hex
    history: list[str] = []
    ok = 0
    timeout = aiohttp.ClientTimeout(total=600)  # persona.py's TIMEOUT: the figures are CPU, not latency
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), timeout=timeout) as model, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), timeout=timeout) as agent:
        for _ in range(turns):
            path, body = model_request(shape, history)
            async with model.post(model_url + path, json=body) as answer:
                said = json.loads(answer_text(shape, await answer.json()))["input"]
            history.append(f"user: {said}")
            async with agent.post(agent_url, json={"message": said, "session_id": session}) as reply:
                text = (await reply.json())["text"]
                ok += reply.status == 200 and "echo" in text
            history.append(f"agent: {text}")
    return ok


async def main(model_url: str, agent_url: str, shape: str, conversations: int, turns: int, concurrency: int,
               client: str = "httpx") -> None:
    slots = asyncio.Semaphore(concurrency)
    context = ssl.create_default_context()
    play = aiohttp_conversation if client == "aiohttp" else conversation

    async def one() -> int:
        async with slots:
            return await play(model_url, agent_url, shape, turns, context)

    print(sum(await asyncio.gather(*(one() for _ in range(conversations)))))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                     *sys.argv[7:8]))
