"""The A2A baseline: the same conversations tamesu runs, sent with the a2a-sdk client and nothing else.

    python bench/a2a_baseline_client.py ORIGIN BINDING STREAM CONVERSATIONS TURNS CONCURRENCY
BINDING is JSONRPC, HTTP+JSON or GRPC (A2A 1.0); STREAM is 0 or 1. Each conversation has one client; every
turn after the first continues the context of the task before it, as tamesu does.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import grpc
import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.transports.grpc import GrpcTransport
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest


def _channel(url: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(url.removeprefix("http://"))


async def conversation(origin: str, binding: str, stream: bool, turns: int) -> int:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, origin).get_agent_card()
        chosen = [i for i in card.supported_interfaces if i.protocol_binding == binding and i.protocol_version == "1.0"]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen)
        card.capabilities.streaming = stream
        factory = ClientFactory(ClientConfig(streaming=stream, httpx_client=http, grpc_channel_factory=_channel,
                                             supported_protocol_bindings=[binding]))
        if binding == "GRPC":
            factory.register("GRPC", lambda card, url, config: GrpcTransport.create(card, url, config))
        client = factory.create(card)
        context_id = ""
        answered = 0
        try:
            for turn in range(turns):
                request = SendMessageRequest(message=Message(
                    role=Role.ROLE_USER, message_id=uuid.uuid4().hex, context_id=context_id,
                    parts=[Part(text=f"step {turn + 1}")]))
                async for event in client.send_message(request, context=ClientCallContext(timeout=30)):
                    if event.HasField("task"):
                        context_id = event.task.context_id or context_id
                answered += 1
        finally:
            await client.close()
    return answered


async def main(origin: str, binding: str, stream: bool, conversations: int, turns: int, concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with slots:
            return await conversation(origin, binding, stream, turns)

    print(sum(await asyncio.gather(*(one() for _ in range(conversations)))))


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], args[2] == "1", int(args[3]), int(args[4]), int(args[5])))
