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

import asyncio
import base64
import json
import threading
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed


async def _emit(ws: ServerConnection, event: dict[str, Any]) -> None:
    await ws.send(json.dumps({"event_id": "evt_1", **event}))


OFFERED_EXTENSIONS: list[str | None] = []
"""Each connection's Sec-WebSocket-Extensions header as the client sent it (None: no extension offered)."""


async def _handler(ws: ServerConnection) -> None:
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


class BadRealtime:
    """The servers on one port, on their own loop in a thread; `stop` ends them."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="bad-realtime")
        self._thread.start()

        async def start() -> Server:
            return await serve(_handler, "127.0.0.1", 0, ping_interval=None)

        self.server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self.url = f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
