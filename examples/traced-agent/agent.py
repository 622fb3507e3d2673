"""A shop assistant over REST that answers with text only and says what it did in OpenTelemetry spans.

POST /chat  {"message": str, "session_id": str}  ->  {"reply": str}

Every turn is traced with the OpenTelemetry SDK under the caller's W3C `traceparent`, following the GenAI
semantic conventions: `invoke_agent traced-shop` around the turn, `chat NAME` for each model call (with
gen_ai.usage.input_tokens / output_tokens), `execute_tool NAME` for each tool call (gen_ai.tool.name,
gen_ai.tool.call.arguments). The spans go over OTLP/HTTP (protobuf) to OTEL_EXPORTER_OTLP_ENDPOINT, batched as a
production agent would. The "model" is a few rules, so it runs offline; its spans are what a real one's are.

Run it: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python agent.py --port 0  (prints where it listens)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

MODEL = "shop-rules-1"
ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {"item": "blue sneakers", "status": "shipped", "eta": "Friday"},
    "ORD-1002": {"item": "rain jacket", "status": "delivered", "eta": None},
}
_ORDER = re.compile(r"ORD-\d{4}", re.IGNORECASE)


class ToolFailed(Exception):
    pass


@dataclass
class Conversation:
    wants_refund: bool = False
    refunds: list[str] = field(default_factory=list)


SESSIONS: dict[str, Conversation] = {}
tracer = trace.get_tracer("traced-shop")


def _chat(messages: list[str], answer: str) -> str:
    """One call of the "model": its span has the GenAI attributes a real client's instrumentation records."""
    with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "shop-rules", "gen_ai.request.model": MODEL,
            "gen_ai.response.model": MODEL}) as span:
        time.sleep(0.005)  # a model call takes time: the waterfall and llm_time_ms have something to show
        span.set_attribute("gen_ai.usage.input_tokens", sum(len(m.split()) for m in messages) + 30)
        span.set_attribute("gen_ai.usage.output_tokens", len(answer.split()))
        return answer


def _tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(arguments)}) as span:
        time.sleep(0.002)
        try:
            result = TOOLS[name](**arguments)
        except ToolFailed as exc:
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            return {"error": str(exc)}
        span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        span.set_status(Status(StatusCode.OK))
        return result


def lookup_order(order_id: str) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise ToolFailed(f"no order {order_id}")
    return {"order_id": order_id, **ORDERS[order_id]}


def issue_refund(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "refund": f"RF-{order_id[4:]}"}


TOOLS = {"lookup_order": lookup_order, "issue_refund": issue_refund}


def answer(conversation: Conversation, message: str) -> str:
    """The agent's loop: the model decides, tools run, the model answers."""
    found = _ORDER.search(message)
    if "refund" in message.lower():
        conversation.wants_refund = True
    if found is None:
        question = "Which order is it? Please give me its number (ORD-....)." if conversation.wants_refund \
            else "How can I help with your order?"
        return _chat([message], question)
    order_id = found.group(0).upper()
    _chat([message], f"(calls lookup_order {order_id})")
    order = _tool("lookup_order", {"order_id": order_id})
    if "error" in order:
        return _chat([message, json.dumps(order)], f"I cannot find the order {order_id}. Could you check it?")
    if conversation.wants_refund:
        refund = _tool("issue_refund", {"order_id": order_id})
        conversation.refunds.append(refund["refund"])
        return _chat([message, json.dumps(refund)],
                     f"Refund {refund['refund']} issued for the {order['item']}: 3-5 business days.")
    eta = f", arriving {order['eta']}" if order["eta"] else ""
    return _chat([message, json.dumps(order)], f"Your {order['item']} ({order_id}) is {order['status']}{eta}.")


async def chat(request: Request) -> JSONResponse:
    body = await request.json()
    message, session = str(body.get("message", "")), str(body.get("session_id", ""))
    conversation = SESSIONS.setdefault(session, Conversation())
    # the caller's traceparent makes this turn's spans part of the trace tamesu sent
    parent = propagate.extract(dict(request.headers))
    with tracer.start_as_current_span("invoke_agent traced-shop", context=parent, kind=SpanKind.SERVER,
                                      attributes={"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": "traced-shop",
                                                  "gen_ai.conversation.id": session}):
        reply = answer(conversation, message)
    return JSONResponse({"reply": reply})


app = Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def setup_tracing() -> TracerProvider:
    """The SDK as an agent sets it up: OTLPSpanExporter reads OTEL_EXPORTER_OTLP_ENDPOINT (or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) itself; a batch goes out every 200 ms."""
    provider = TracerProvider(resource=Resource.create({"service.name": "traced-shop"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=5), schedule_delay_millis=200))
    trace.set_tracer_provider(provider)
    return provider


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    provider = setup_tracing()
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                return
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"traced shop agent listening on http://127.0.0.1:{port}", flush=True)
        await task

    try:
        asyncio.run(serve())
    finally:
        provider.shutdown()  # the last batch goes out before the process ends
    sys.exit(0)


if __name__ == "__main__":
    main()
