"""A small shop agent over tamesu's turn API (gRPC), for tamesu's grpc example: it looks orders up, refunds
them, hands the customer to a person, and streams its answers word by word. Offline and scripted: the replies
are rules below, no model.

Run it:  python agent.py --port 8790      (0 picks a free port; the address is printed)
Every call needs the metadata  authorization: Bearer $GRPC_AGENT_TOKEN  (default demo-token).

How to build your own: implement `TurnServiceServicer` from `tamesu.turn.v1.turn_pb2_grpc` (or generate the
stubs for your language from proto/tamesu/turn/v1/turn.proto). `Converse` reads user turns from a stream and
answers each with events ending in `TurnEnd` (or `Handoff`, `SessionEnd`, `Error`); `SendTurn` answers one
turn with the same events in one reply. Both here share `answer()`, which yields the events of one turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict

from tamesu.turn.v1 import turn_pb2, turn_pb2_grpc

ORDERS = {
    "ORD-1001": {"order_id": "ORD-1001", "item": "blue sneakers", "status": "shipped", "eta": "Friday"},
    "ORD-2002": {"order_id": "ORD-2002", "item": "red scarf", "status": "processing", "eta": "next week"},
}
POLICY = "Refunds are paid back within 5 days to the card that paid."


@dataclass
class Conversation:
    """What the agent remembers of one session (Converse: the stream; SendTurn: the session_id)."""

    order_id: str | None = None
    refunds: int = 0
    hung_up: bool = False
    said: list[str] = field(default_factory=list)


def value(data: Any) -> struct_pb2.Value:
    found = struct_pb2.Value()
    ParseDict(data, found)
    return found


def struct(data: dict[str, Any]) -> struct_pb2.Struct:
    found = struct_pb2.Struct()
    ParseDict(data, found)
    return found


def words(text: str) -> list[turn_pb2.AgentEvent]:
    """The reply as one delta per word (with its space), so a client sees it stream."""
    pieces = re.findall(r"\S+\s*", text)
    return [turn_pb2.AgentEvent(delta=turn_pb2.TextDelta(text=piece)) for piece in pieces]


def done(data: dict[str, Any] | None = None) -> turn_pb2.AgentEvent:
    return turn_pb2.AgentEvent(turn_end=turn_pb2.TurnEnd(data=struct(data) if data else None))


class Shop:
    def __init__(self, word_delay: float, slow_seconds: float) -> None:
        self.word_delay = word_delay
        self.slow_seconds = slow_seconds

    async def answer(self, turn: turn_pb2.UserTurn, memory: Conversation,
                     context: grpc.aio.ServicerContext) -> AsyncIterator[turn_pb2.AgentEvent]:
        """The events of one turn, the last one ending it."""
        text = turn.text
        memory.said.append(text)
        print(f"session {turn.session_id[:8]} turn {turn.turn}: {text}", flush=True)
        found = re.search(r"ORD-\d+", text)
        if found:
            memory.order_id = found.group(0)
        if re.search(r"(?i)outage", text):
            # a server error: the call ends with this status, and tamesu fails the turn with it
            await context.abort(grpc.StatusCode.INTERNAL, "the order database is down")
        if re.search(r"(?i)glitch", text):
            yield turn_pb2.AgentEvent(error=turn_pb2.Error(code="lookup_failed", message="the lookup timed out"))
            return
        if re.search(r"(?i)hang up", text):
            # misbehaving on purpose: the turn ends, then Converse ends the call without a SessionEnd
            memory.hung_up = True
            for event in words("Hanging up."):
                yield event
            yield done()
            return
        if re.search(r"(?i)slowly", text):
            await asyncio.sleep(self.slow_seconds)
        if re.search(r"(?i)\b(person|human)\b", text):
            for event in words("Let me get a colleague from billing."):
                yield event
            summary = f"Customer asked for a person about {memory.order_id or 'an order'}."
            yield turn_pb2.AgentEvent(handoff=turn_pb2.Handoff(to="billing", summary=summary))
            return
        if re.search(r"(?i)\b(bye|goodbye)\b", text):
            for event in words("Goodbye!"):
                yield event
            yield turn_pb2.AgentEvent(session_end=turn_pb2.SessionEnd(reason="the customer said goodbye"))
            return
        async for event in self._orders(text, memory):
            yield event

    async def _orders(self, text: str, memory: Conversation) -> AsyncIterator[turn_pb2.AgentEvent]:
        order = ORDERS.get(memory.order_id or "")
        if memory.order_id and order is None:
            reply, data = f"I cannot find {memory.order_id}. Could you check the number?", None
        elif order is None:
            reply = "I can look up an order (say its number, like ORD-1001), refund it, or get you a person."
            data = None
        else:
            yield turn_pb2.AgentEvent(tool_call=turn_pb2.ToolCall(
                id=f"call-{len(memory.said)}-1", name="lookup_order", args=struct({"order_id": order["order_id"]}),
                result=value(order)))
            if re.search(r"(?i)refund", text):
                memory.refunds += 1
                call_id = f"call-{len(memory.said)}-2"
                reference = f"RF-{800 + memory.refunds}"
                # the result comes in its own event here, as it would from a slower tool
                yield turn_pb2.AgentEvent(tool_call=turn_pb2.ToolCall(
                    id=call_id, name="issue_refund", args=struct({"order_id": order["order_id"]})))
                yield turn_pb2.AgentEvent(tool_result=turn_pb2.ToolResult(
                    id=call_id, result=value({"refund": reference, "policy": POLICY})))
                reply = f"Refund {reference} for {order['order_id']} is on its way: it takes 5 days."
                data = {"order_id": order["order_id"], "refund": reference}
            else:
                reply = (f"Order {order['order_id']} ({order['item']}) is {order['status']}, "
                         f"arriving {order['eta']}.")
                data = {"order_id": order["order_id"], "status": order["status"], "eta": order["eta"]}
        for event in words(reply):
            await asyncio.sleep(self.word_delay)
            yield event
        yield done(data)


class TurnService(turn_pb2_grpc.TurnServiceServicer):
    def __init__(self, shop: Shop, token: str) -> None:
        self.shop = shop
        self.token = token
        self.sessions: dict[str, Conversation] = {}  # SendTurn's memory, by session id

    async def _check_token(self, context: grpc.aio.ServicerContext) -> None:
        given = dict(context.invocation_metadata() or ()).get("authorization", "")
        if given != f"Bearer {self.token}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "send authorization: Bearer <token>")

    async def Converse(self, request_iterator: AsyncIterator[turn_pb2.UserTurn],
                       context: grpc.aio.ServicerContext) -> AsyncIterator[turn_pb2.AgentEvent]:
        await self._check_token(context)
        memory = Conversation()
        async for turn in request_iterator:
            async for event in self.shop.answer(turn, memory, context):
                yield event
                if event.WhichOneof("event") in ("handoff", "session_end"):
                    return  # the conversation is over: ending the call says so too
            if memory.hung_up:
                return

    async def SendTurn(self, request: turn_pb2.UserTurn,
                       context: grpc.aio.ServicerContext) -> turn_pb2.TurnReply:
        await self._check_token(context)
        memory = self.sessions.setdefault(request.session_id, Conversation())
        reply = turn_pb2.TurnReply()
        async for event in self.shop.answer(request, memory, context):
            reply.events.append(event)
        if len(self.sessions) > 1000:  # a long-running demo keeps only recent sessions
            self.sessions.pop(next(iter(self.sessions)))
        return reply


async def serve(port: int, token: str, word_delay: float, slow_seconds: float,
                tls: grpc.ServerCredentials | None = None) -> None:
    server = grpc.aio.server()
    turn_pb2_grpc.add_TurnServiceServicer_to_server(TurnService(Shop(word_delay, slow_seconds), token), server)
    address = f"127.0.0.1:{port}"
    bound = server.add_secure_port(address, tls) if tls is not None else server.add_insecure_port(address)
    await server.start()
    scheme = "grpcs" if tls is not None else "grpc"
    print(f"grpc shop agent listening on {scheme}://127.0.0.1:{bound} (tamesu.turn.v1.TurnService)", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    await server.stop(grace=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8790, help="gRPC port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--word-delay", type=float, default=0.01, help="seconds between streamed words")
    parser.add_argument("--slow-seconds", type=float, default=5.0,
                        help="how long a message with 'slowly' in it takes (to show turn_timeout)")
    parser.add_argument("--tls-cert", help="serve TLS (grpcs://) with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM), with --tls-cert")
    parser.add_argument("--client-ca", help="with --tls-cert: require a client certificate issued by this CA")
    args = parser.parse_args()
    token = os.environ.get("GRPC_AGENT_TOKEN") or "demo-token"
    tls = None
    if args.tls_cert:
        if not args.tls_key:
            parser.error("--tls-cert needs --tls-key")
        pair = (Path(args.tls_key).read_bytes(), Path(args.tls_cert).read_bytes())
        client_ca = Path(args.client_ca).read_bytes() if args.client_ca else None
        tls = grpc.ssl_server_credentials([pair], root_certificates=client_ca, require_client_auth=bool(client_ca))
    asyncio.run(serve(args.port, token, args.word_delay, args.slow_seconds, tls))


if __name__ == "__main__":
    main()
