"""The orchestrator's side of A2A: ask a remote agent one thing, with a2a-sdk's client.

Each question reads the remote agent's card, then its authenticated extended card when the card offers one
and a token is configured (a partner token unlocks more skills), sends one message and waits for the task to
settle. Anything that goes wrong (the agent is unreachable, answers an error, fails the task, takes too long)
comes back as an `Answer` with `ok=False`, so the conversation can tell the user plainly.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, Message, Part, Role, SendMessageRequest, TaskState

TIMEOUT = 10.0
"""Seconds one delegation may take, card included."""
GOOD = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_INPUT_REQUIRED}


@dataclass
class Answer:
    ok: bool
    text: str = ""
    skills: list[str] = field(default_factory=list)
    """The skills on the card that was used (the extended one when it was read)."""
    problem: str = ""


async def ask(url: str, text: str, token: str | None = None) -> Answer:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with asyncio.timeout(TIMEOUT), httpx.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
            return await _ask(http, url, text, token)
    except Exception as exc:  # the user hears "unavailable", whatever broke underneath
        return Answer(ok=False, problem=f"{type(exc).__name__}: {exc}")


async def _ask(http: httpx.AsyncClient, url: str, text: str, token: str | None) -> Answer:
    card = await A2ACardResolver(http, url).get_agent_card()
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                        supported_protocol_bindings=["JSONRPC"])).create(card)
    try:
        if card.capabilities.extended_agent_card and token:
            with contextlib.suppress(Exception):  # the public card is enough to delegate
                card = await client.get_extended_agent_card(GetExtendedAgentCardRequest(),
                                                            context=ClientCallContext(timeout=TIMEOUT))
        request = SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex,
                                                     parts=[Part(text=text)]))
        replies: list[str] = []
        state = TaskState.TASK_STATE_COMPLETED
        async for event in client.send_message(request, context=ClientCallContext(timeout=TIMEOUT)):
            if event.HasField("message"):
                replies += [p.text for p in event.message.parts if p.text]
            elif event.HasField("task"):
                task = event.task
                state = task.status.state
                replies += [p.text for a in task.artifacts for p in a.parts if p.text]
                replies += [p.text for p in task.status.message.parts if p.text]
    finally:
        await client.close()
    skills = [s.id for s in card.skills]
    if state not in GOOD:
        return Answer(ok=False, skills=skills, problem=" ".join(replies) or TaskState.Name(state))
    return Answer(ok=True, text=" ".join(replies), skills=skills)
