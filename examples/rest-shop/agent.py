"""A small shop assistant over REST, for tamesu's demo: order status, returns, and a person on request.

POST /chat         {"message": str, "session_id": str}  ->  {"reply", "tool_calls", "done", "handoff"}
POST /chat/stream  the same request, answered as server-sent events: {"delta": ...} chunks, then [DONE]
GET  /orders/{id}  the shop's record of an order (the state a test checks after the conversation)

Run it: python agent.py --port 8765   (--port 0 picks a free port and prints it)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {"id": "ORD-1001", "item": "blue sneakers", "status": "shipped", "eta": "Friday"},
    "ORD-1002": {"id": "ORD-1002", "item": "rain jacket", "status": "delivered", "eta": None},
    "ORD-1003": {"id": "ORD-1003", "item": "wool socks", "status": "delivered", "eta": None},
}
_ORDER = re.compile(r"ORD-\d{4}", re.IGNORECASE)


class Conversation:
    def __init__(self) -> None:
        self.pending_return = False
        self.rma_count = 0


SESSIONS: dict[str, Conversation] = {}


def answer(message: str, session_id: str) -> dict[str, Any]:
    """The shop's rules, in the order a clerk would apply them."""
    convo = SESSIONS.setdefault(session_id, Conversation())
    text = message.lower()
    order_match = _ORDER.search(message)
    order_id = order_match.group(0).upper() if order_match else None
    reply: dict[str, Any] = {"reply": "", "tool_calls": [], "done": False, "handoff": None}

    if "human" in text or "person" in text:
        reply["reply"] = "I'm passing you to a colleague from our support team."
        reply["handoff"] = {"queue": "support", "summary": f"Customer asked for a person: {message}"}
        reply["done"] = True
    elif text.strip() in ("bye", "goodbye", "thanks, bye", "that is all") or "bye" in text.split():
        reply["reply"] = "Thank you for shopping with us. Goodbye!"
        reply["done"] = True
    elif convo.pending_return and order_id:
        convo.pending_return = False
        convo.rma_count += 1
        rma = f"RMA-{5520 + convo.rma_count}"
        ORDERS.setdefault(order_id, {"id": order_id})["status"] = "return_requested"
        reply["tool_calls"] = [{"name": "create_return", "args": {"order_id": order_id}, "result": {"rma": rma}}]
        reply["reply"] = f"Return {rma} created for {order_id}. Print the label we emailed you."
        reply["rma"] = rma
    elif "return" in text:
        if order_id:
            convo.pending_return = True
            return answer(message, session_id)
        convo.pending_return = True
        reply["reply"] = "I can help with a return. Which order number is it?"
        reply["awaiting_input"] = True
    elif order_id or "order" in text:
        if not order_id:
            reply["reply"] = "Sure, what is your order number? It looks like ORD-1234."
            reply["awaiting_input"] = True
        elif order_id not in ORDERS:
            reply["tool_calls"] = [{"name": "lookup_order", "args": {"order_id": order_id}, "result": None}]
            reply["reply"] = f"I could not find {order_id}. Please check the number."
        else:
            order = ORDERS[order_id]
            reply["tool_calls"] = [{"name": "lookup_order", "args": {"order_id": order_id}, "result": order}]
            eta = f", arriving {order['eta']}" if order.get("eta") else ""
            reply["reply"] = f"Order {order_id} ({order['item']}) is {order['status']}{eta}."
            reply["order"] = order
    else:
        reply["reply"] = "Hello! I can check an order's status or start a return. How can I help?"
    return reply


async def chat(request: Request) -> Response:
    body = await request.json()
    return JSONResponse(answer(str(body.get("message", "")), str(body.get("session_id", "default"))))


async def chat_stream(request: Request) -> Response:
    body = await request.json()
    full = answer(str(body.get("message", "")), str(body.get("session_id", "default")))

    async def events() -> Any:
        words = full["reply"].split(" ")
        for index, word in enumerate(words):
            await asyncio.sleep(0.005)
            chunk = word if index == 0 else " " + word
            yield f"data: {json.dumps({'delta': chunk})}\n\n"
        final = {k: v for k, v in full.items() if k != "reply"}
        yield f"data: {json.dumps({'final': True, **final})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def order(request: Request) -> Response:
    found = ORDERS.get(request.path_params["order_id"].upper())
    return JSONResponse(found or {"error": "not found"}, status_code=200 if found else 404)


app = Starlette(routes=[
    Route("/chat", chat, methods=["POST"]),
    Route("/chat/stream", chat_stream, methods=["POST"]),
    Route("/orders/{order_id}", order),
])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                return
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"shop agent listening on http://127.0.0.1:{port}", flush=True)
        await task

    asyncio.run(serve())
    sys.exit(0)


if __name__ == "__main__":
    main()
