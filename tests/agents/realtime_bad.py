"""Realtime servers that break the protocol on purpose, one behaviour per path, for the realtime target's
failure tests:

- `/close`: closes the socket (1011) when asked for a response;
- `/not-json`: answers a response request with a message that is not JSON;
- `/silent`: starts a response and never finishes it;
- `/no-session`: never says session.created;
- `/wrong-session-format`: agrees to audio/pcmu whatever it was asked;
- `/odd-audio`: sends pcm16 audio of an odd number of bytes;
- `/audio-in-text`: sends audio in a text session;
- `/error`: answers with an error event.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from agents.ws_thread import ThreadedWebsocketServer


async def _emit(ws: ServerConnection, event: dict[str, Any]) -> None:
    await ws.send(json.dumps({"event_id": "evt_1", **event}))


OFFERED_EXTENSIONS: list[str | None] = []
"""Each connection's Sec-WebSocket-Extensions header as the client sent it (None: no extension offered)."""


async def _misbehave(ws: ServerConnection) -> None:
    OFFERED_EXTENSIONS.append(ws.request.headers.get("Sec-WebSocket-Extensions") if ws.request is not None else None)
    mode = (ws.request.path if ws.request is not None else "/").strip("/").split("?")[0]
    if mode == "no-session":
        await ws.wait_closed()  # says nothing until the client gives up
        return
    session: dict[str, Any] = {"type": "realtime", "output_modalities": ["text"]}
    await _emit(ws, {"type": "session.created", "session": session})
    try:
        async for message in ws:
            event = json.loads(message)
            kind = event.get("type")
            if kind == "session.update":
                session = {**session, **event.get("session", {})}
                if mode == "wrong-session-format":
                    session["audio"] = {"input": {"format": {"type": "audio/pcmu"}},
                                        "output": {"format": {"type": "audio/pcmu"}}}
                await _emit(ws, {"type": "session.updated", "session": session})
            elif kind == "response.create":
                where = {"response_id": "resp_1", "item_id": "item_1", "output_index": 0, "content_index": 0}
                if mode == "close":
                    await ws.close(1011, "agent crashed")
                    return
                if mode == "not-json":
                    await ws.send("this is not json {")
                    continue
                if mode == "error":
                    await _emit(ws, {"type": "error", "error": {"type": "server_error", "code": "overloaded",
                                                                "message": "try again later"}})
                    continue
                await _emit(ws, {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
                if mode == "silent":
                    continue
                if mode in ("odd-audio", "audio-in-text"):
                    await _emit(ws, {"type": "response.output_audio.delta", **where,
                                     "delta": base64.b64encode(b"\x01\x02\x03").decode()})
                await _emit(ws, {"type": "response.done", "response": {"id": "resp_1", "status": "completed"}})
    except ConnectionClosed:
        pass


class BadRealtime(ThreadedWebsocketServer):
    """The servers on one port, on their own loop in a thread; `stop` ends them."""

    def __init__(self) -> None:
        super().__init__("bad-realtime")

    async def _handler(self, ws: ServerConnection) -> None:
        await _misbehave(ws)
