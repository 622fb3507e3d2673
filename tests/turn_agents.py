"""Small agents of tamesu's turn API for tests, each answering a user turn's text with the events `answer` gives,
on the stream (`Converse`) and unary (`SendTurn`) alike; served on a free port of 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc

from tamesu.turn.v1 import turn_pb2, turn_pb2_grpc

Answer = Callable[[str], list[turn_pb2.AgentEvent]]


def said(text: str) -> list[turn_pb2.AgentEvent]:
    """A reply of one delta, then the turn's end."""
    return [turn_pb2.AgentEvent(delta=turn_pb2.TextDelta(text=text)),
            turn_pb2.AgentEvent(turn_end=turn_pb2.TurnEnd())]


class ScriptedTurnAgent(turn_pb2_grpc.TurnServiceServicer):
    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    async def Converse(self, request_iterator: AsyncIterator[turn_pb2.UserTurn],
                       context: Any) -> AsyncIterator[turn_pb2.AgentEvent]:
        async for turn in request_iterator:
            for event in self.answer(turn.text):
                yield event

    async def SendTurn(self, request: turn_pb2.UserTurn, context: Any) -> turn_pb2.TurnReply:
        return turn_pb2.TurnReply(events=self.answer(request.text))


@asynccontextmanager
async def serving(answer: Answer, **options: int) -> AsyncIterator[str]:
    """`grpc://127.0.0.1:PORT` of a ScriptedTurnAgent, with gRPC channel `options` (`max_receive_message_length`:
    `grpc.max_receive_message_length`), stopped when the block ends."""
    server = grpc.aio.server(options=[(f"grpc.{name}", value) for name, value in options.items()])
    turn_pb2_grpc.add_TurnServiceServicer_to_server(ScriptedTurnAgent(answer), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        await server.stop(grace=None)
