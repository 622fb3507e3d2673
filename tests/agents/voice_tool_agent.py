"""A small voice agent for the `voice` target's `session.open` and `messages.tool_calls`: `GET /calls` creates a
call (`{"call": {"id": "c-123", "token": "t-9"}}`); the websocket `/socket?call=c-123` (with `Authorization:
Bearer t-9`; anything else is refused with close code 4001) carries binary pcm16 16 kHz. It greets with 0.6 s of
tone; when the caller has spoken (loud frames, then 0.4 s of quiet ones) it asks for a tool with
`{"type": "function_call", "id": "f1", "name": "lookup_order", "arguments": "{\\"order\\": \\"42\\"}"}` and, once a
`function_result` for `f1` comes, answers with 0.6 s of tone. It records the JSON messages tamesu sent. `arguments`
replaces the call's arguments text."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from agents.end_of_speech import EndOfSpeech
from agents.ws_thread import ThreadedWebsocketServer

RATE = 16000
CALL = {"id": "c-123", "token": "t-9"}


def tone(ms: int) -> bytes:
    t = np.arange(RATE * ms // 1000) / RATE
    return (np.sin(2 * np.pi * 440 * t) * 8000).astype("<i2").tobytes()


class VoiceToolAgent(ThreadedWebsocketServer):
    def __init__(self, arguments: str = json.dumps({"order": "42"})) -> None:
        self.arguments = arguments
        self.received: list[dict[str, Any]] = []
        self.calls_created = 0
        super().__init__("voice-tool-agent")
        self.http = f"http://127.0.0.1:{self.port}"
        self.ws = self.url

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/calls":
            self.calls_created += 1
            return connection.respond(HTTPStatus.OK, json.dumps({"call": CALL}))
        if not request.path.startswith("/socket"):
            return connection.respond(HTTPStatus.NOT_FOUND, "no such path\n")
        return None

    async def _speak(self, ws: ServerConnection, ms: int) -> None:
        audio = tone(ms)
        for k in range(0, len(audio), 640):
            await ws.send(audio[k:k + 640])
            await asyncio.sleep(0.02)

    async def _handler(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        if (request.path != f"/socket?call={CALL['id']}"
                or request.headers.get("Authorization") != f"Bearer {CALL['token']}"):
            await ws.close(4001, "unknown call")
            return
        caller = EndOfSpeech(quiet_frames=20)
        try:
            await self._speak(ws, 600)
            async for message in ws:
                if isinstance(message, str):
                    document = json.loads(message)
                    self.received.append(document)
                    if document.get("type") == "function_result" and document.get("id") == "f1":
                        await self._speak(ws, 600)
                    continue
                if caller.heard(message):
                    await ws.send(json.dumps({"type": "function_call", "id": "f1", "name": "lookup_order",
                                              "arguments": self.arguments}))
        except ConnectionClosed:
            pass
