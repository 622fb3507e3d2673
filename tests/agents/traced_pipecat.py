"""A Pipecat bot on the protobuf websocket (text turns: RTVI send-text), instrumented with the real OpenTelemetry
SDK: the handshake's `traceparent` is all it gets (RTVI has no slot for a turn's), so its `pipecat session` span
sits under it and each turn's `voice turn` span under that, all on the conversation's trace, as a Twilio or SIP
agent's spans are."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from agents.pipecat_agents import SEGMENT_IDS, rtvi
from agents.traced import provider
from agents.ws_thread import ThreadedWebsocketServer
from tamesu._proto.pipecat.v1 import frames_pb2


class TracedPipecatBot(ThreadedWebsocketServer):
    """Answers send-text with "you said: <text>"; `skew_s`: its clock that far off tamesu's."""

    def __init__(self, endpoint: str, skew_s: float = 0.0) -> None:
        self.provider, _processor = provider(endpoint, service="traced-pipecat-bot", skew_s=skew_s)
        self.tracer = self.provider.get_tracer("traced-pipecat-bot")
        super().__init__("traced-pipecat-bot")

    async def _handler(self, ws: ServerConnection) -> None:
        headers = {name.lower(): value for name, value in ws.request.headers.raw_items()} if ws.request else {}
        conversation = TraceContextTextMapPropagator().extract(carrier=headers)
        with self.tracer.start_as_current_span("pipecat session", context=conversation, kind=SpanKind.SERVER):
            session = trace.set_span_in_context(trace.get_current_span())
        try:
            async for message in ws:
                frame = frames_pb2.Frame.FromString(message)  # type: ignore[arg-type]
                if frame.WhichOneof("frame") != "message":
                    continue
                document: dict[str, Any] = json.loads(frame.message.data)
                if document.get("type") == "client-ready":
                    await ws.send(rtvi("bot-ready", {"version": "2.2.0"}))
                elif document.get("type") == "send-text":
                    said = str((document.get("data") or {}).get("content", ""))
                    with self.tracer.start_as_current_span("voice turn", context=session,
                                                           attributes={"app.said": said}):
                        pass
                    await ws.send(rtvi("bot-llm-started"))
                    await ws.send(rtvi("bot-output", {"text": f"you said: {said}", "will_be_spoken": False,
                                                      "segment_id": next(SEGMENT_IDS), "spoken_status": "new"}))
                    await ws.send(rtvi("bot-llm-stopped"))
        except ConnectionClosed:
            pass

    def stop(self) -> None:
        super().stop()
        self.provider.force_flush(5000)
        self.provider.shutdown()
