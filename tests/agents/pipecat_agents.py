"""Small bots on a Pipecat protobuf websocket written here, each on its path, for what the reference pipecat bot
does not do wrong (no bot-ready, silence, a drop, a flood, another sample rate) and to see exactly what tamesu
sends. They speak the wire as tamesu.pipecat.v1 describes it; the reference bot (pipecat's own serializer) is
what checks that description. Each records the frames tamesu sent it, and its handshake's headers.

- `/echo`: bot-ready; answers send-text with bot-llm-started, a bot-output "you said: <text>", bot-llm-stopped;
  "weather" makes it call get_weather client-side and read the result back; a dtmf makes it say "pressed <key>";
  speech (loud audio frames, then 0.4 s of quiet ones) gets 0.6 s of tone at real-time pace and "heard you";
- `/keys`, `/fuzz`: as `/echo`, each for a test of its own;
- `/late`: as `/echo` to speech, but the way a loaded bot answers: 0.3 s of tone first, a 1.2 s pause, and only
  then bot-started-speaking, 0.3 s more, "heard you late" and bot-stopped-speaking;
- `/lagging`: to its first speech, bot-started-speaking, a bot-output "the first answer" announced before its
  speech, 0.6 s of tone and bot-stopped-speaking, but never the report that the sentence was spoken; to the
  next, that report at last (as a loaded bot sends it), then "the second answer" spoken as `/echo` speaks;
- `/starved`: to its first speech, bot-started-speaking, "the first answer" announced and 40 ms of tone; then it
  holds tamesu still (SIGSTOP, agents/freeze.py) at an idle moment of its loop and sends the rest of the reply
  in a burst (200 ms of tone, the sentence reported spoken, bot-stopped-speaking) and lets tamesu go 1.5 s after
  the reply's first tone, past any persona's interrupt timer: tamesu then holds the rest of the reply unread
  when its caller is due to talk over it. `starved` says whether the hold was caught (else tamesu ran on). To
  the next speech, "the second answer" spoken;
- `/long`: to speech, bot-started-speaking, "the first part" reported spoken after 0.2 s of tone, then "and the
  second part" announced, 2 s of tone, that sentence reported spoken and bot-stopped-speaking: a caller who talks
  over it does so in its second sentence;
- `/unannounced`: as `/echo` to speech, but it never says it is speaking (no bot-started-speaking or
  bot-stopped-speaking): 0.6 s of tone and "heard you unannounced";
- `GET /start`: a bot runner's start endpoint, `{"ws_url": ".../started", "token": "tk-1"}`; `/started` is
  `/echo` for a client that sends `Authorization: Bearer tk-1` (any other is refused, close code 4001);
- `/no-ready`: never answers client-ready;
- `/silent`: bot-ready, then nothing;
- `/drop`: bot-ready; closes the socket when the user first speaks or writes;
- `/flood`: bot-ready, then tone as fast as the socket takes it, forever;
- `/rate`: bot-ready; answers with tone in frames that say 24000 Hz;
- `/chatter`: bot-ready; answers send-text with bot-llm-started and then bot-llm-text, forever.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from http import HTTPStatus
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from agents import freeze
from agents.end_of_speech import EndOfSpeech
from agents.ws_thread import ThreadedWebsocketServer
from tamesu._proto.pipecat.v1 import frames_pb2

SEGMENT_IDS = itertools.count(1)  # pipecat's segment ids are the ids of its text frames: never reused


def rtvi(kind: str, data: Any = None) -> bytes:
    frame = frames_pb2.Frame()
    frame.message.data = json.dumps({"label": "rtvi-ai", "type": kind, "id": "b1", "data": data})
    return frame.SerializeToString()


def tone(ms: int, rate: int) -> bytes:
    t = np.arange(rate * ms // 1000) / rate
    return (np.sin(2 * np.pi * 440 * t) * 8000).astype("<i2").tobytes()


def audio_frame(data: bytes, rate: int) -> bytes:
    frame = frames_pb2.Frame()
    frame.audio.audio = data
    frame.audio.sample_rate = rate
    frame.audio.num_channels = 1
    return frame.SerializeToString()


class PipecatAgents(ThreadedWebsocketServer):
    def __init__(self) -> None:
        self.received: dict[str, list[dict[str, Any]]] = {}
        self.handshakes: dict[str, list[dict[str, str]]] = {}
        """Each connection's handshake headers (lower-cased names), by path."""
        self.started = 0
        self.starved: list[bool] = []
        """`/starved`: for each call, whether tamesu was held still while the rest of the reply came."""
        super().__init__("pipecat-agents")

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/start":
            self.started += 1
            return connection.respond(HTTPStatus.OK, json.dumps({"ws_url": f"{self.url}/started", "token": "tk-1"}))
        return None

    def frames(self, path: str) -> list[dict[str, Any]]:
        return list(self.received.get(path, []))

    async def _say(self, ws: ServerConnection, text: str) -> None:
        await ws.send(rtvi("bot-llm-started"))
        await ws.send(rtvi("bot-output", {"text": text, "segment_id": next(SEGMENT_IDS), "will_be_spoken": False,
                                          "spoken_status": "new"}))
        await ws.send(rtvi("bot-llm-stopped"))

    async def _handler(self, ws: ServerConnection) -> None:
        path = ws.request.path if ws.request is not None else "/"
        if path == "/started" and (ws.request is None or ws.request.headers.get("Authorization") != "Bearer tk-1"):
            await ws.close(4001, "not started")
            return
        log = self.received.setdefault(path, [])
        if ws.request is not None:
            self.handshakes.setdefault(path, []).append(
                {name.lower(): value for name, value in ws.request.headers.raw_items()})
        flood: asyncio.Task[None] | None = None
        lagging: int | None = None
        starving = True
        caller = EndOfSpeech(quiet_frames=20)
        try:
            async for message in ws:
                frame = frames_pb2.Frame.FromString(message)  # type: ignore[arg-type]
                which = frame.WhichOneof("frame")
                if which == "audio":
                    heard = caller.heard(frame.audio.audio)
                    log.append({"audio": len(frame.audio.audio), "sample_rate": frame.audio.sample_rate,
                                "num_channels": frame.audio.num_channels, "loud": caller.loud})
                    user = caller.loud
                    if path in ("/echo", "/late", "/unannounced") and heard:
                        await self._speak(ws, late=path == "/late", announced=path != "/unannounced")
                    if path == "/long" and heard:
                        await self._long(ws)
                    if path == "/lagging" and heard:
                        lagging = await self._lag(ws, lagging)
                    if path == "/starved" and heard:
                        starving = await self._starve(ws, starving)
                    document: dict[str, Any] = {}
                else:
                    document = json.loads(frame.message.data)
                    log.append(document)
                    user = document.get("type") in ("send-text", "dtmf", "llm-function-call-result")
                if document.get("type") == "client-ready" and path != "/no-ready":
                    await ws.send(rtvi("bot-ready", {"version": "2.2.0"}))
                    if path != "/flood":
                        continue
                    user = True  # the flood starts at once: it is queued, stale, before the user has spoken
                if not user:
                    continue
                if path == "/drop":
                    await ws.send(rtvi("bot-llm-started"))
                    await ws.close()
                    return
                if path == "/chatter" and flood is None:
                    async def chatter() -> None:
                        try:
                            await ws.send(rtvi("bot-llm-started"))
                            while True:
                                await ws.send(rtvi("bot-llm-text", {"text": "la "}))
                                await asyncio.sleep(0.01)
                        except ConnectionClosed:
                            pass

                    flood = asyncio.create_task(chatter())
                if path == "/flood" and flood is None:
                    async def pour() -> None:
                        # 200 ms a frame: a reader starved of CPU (a loaded machine) still sees several times
                        # real time arrive; 20 ms frames read at its own slow pace looked paced
                        chunk = audio_frame(tone(200, 16000), 16000)
                        try:
                            while True:
                                await ws.send(chunk)
                                await asyncio.sleep(0)
                        except ConnectionClosed:
                            pass

                    flood = asyncio.create_task(pour())
                if path == "/rate":
                    for _ in range(50):
                        await ws.send(audio_frame(tone(20, 24000), 24000))
                        await asyncio.sleep(0.02)
                if path in ("/echo", "/keys", "/fuzz", "/started"):
                    await self._echo(ws, document)
        except ConnectionClosed:
            pass
        finally:
            if flood is not None:
                flood.cancel()

    async def _speak(self, ws: ServerConnection, *, late: bool = False, announced: bool = True) -> None:
        await ws.send(rtvi("user-input", {"text": "hello there", "input_type": "transcription", "final": True}))

        async def play(ms: int) -> None:
            audio = tone(ms, 16000)
            for k in range(0, len(audio), 640):
                await ws.send(audio_frame(audio[k:k + 640], 16000))
                await asyncio.sleep(0.02)

        if late:
            await play(300)
            await asyncio.sleep(1.2)
        if announced:
            await ws.send(rtvi("bot-started-speaking"))
        await play(300 if late else 600)
        text = "heard you late" if late else "heard you" if announced else "heard you unannounced"
        await ws.send(rtvi("bot-output", {"text": text, "segment_id": next(SEGMENT_IDS), "will_be_spoken": True,
                                          "spoken_status": "completed"}))
        if announced:
            await ws.send(rtvi("bot-stopped-speaking"))

    async def _long(self, ws: ServerConnection) -> None:
        await ws.send(rtvi("bot-started-speaking"))
        for text, ms in (("the first part", 200), ("and the second part", 2000)):
            segment = next(SEGMENT_IDS)
            await ws.send(rtvi("bot-output", {"text": text, "segment_id": segment, "will_be_spoken": True,
                                              "spoken_status": "new"}))
            audio = tone(ms, 16000)
            for k in range(0, len(audio), 640):
                await ws.send(audio_frame(audio[k:k + 640], 16000))
                await asyncio.sleep(0.02)
            await self._say_spoken(ws, text, segment)
        await ws.send(rtvi("bot-stopped-speaking"))

    async def _lag(self, ws: ServerConnection, first: int | None) -> int | None:
        """`/lagging`: the first answer's segment is reported spoken only when the caller speaks again."""
        await ws.send(rtvi("bot-started-speaking"))
        if first is not None:
            await ws.send(rtvi("bot-output", {"text": "the first answer", "segment_id": first, "will_be_spoken": True,
                                              "spoken_status": "completed"}))
        segment = next(SEGMENT_IDS)
        text = "the first answer" if first is None else "the second answer"
        await ws.send(rtvi("bot-output", {"text": text, "segment_id": segment, "will_be_spoken": True,
                                          "spoken_status": "new"}))
        audio = tone(600, 16000)
        for k in range(0, len(audio), 640):
            await ws.send(audio_frame(audio[k:k + 640], 16000))
            await asyncio.sleep(0.02)
        if first is not None:
            await ws.send(rtvi("bot-output", {"text": text, "segment_id": segment, "will_be_spoken": True,
                                              "spoken_status": "completed"}))
        await ws.send(rtvi("bot-stopped-speaking"))
        return segment if first is None else None

    async def _starve(self, ws: ServerConnection, first: bool) -> bool:
        """`/starved`: the first reply's rest comes while tamesu is held still; the next is plain."""
        segment = next(SEGMENT_IDS)
        client_port, server_port = ws.remote_address[1], ws.local_address[1]
        pid = freeze.owner(client_port, server_port) if first else None
        await ws.send(rtvi("bot-started-speaking"))
        if not first:
            await self._say_spoken(ws, "the second answer", segment)
            await ws.send(audio_frame(tone(100, 16000), 16000))
            await ws.send(rtvi("bot-stopped-speaking"))
            return False
        await ws.send(rtvi("bot-output", {"text": "the first answer", "segment_id": segment, "will_be_spoken": True,
                                          "spoken_status": "new"}))
        began = time.monotonic()
        for _ in range(2):
            await ws.send(audio_frame(tone(20, 16000), 16000))
            await asyncio.sleep(0.02)
        held = False
        try:
            # caught idle well before the persona is due to talk over the reply (its test draws 1.1 s or more)
            while pid is not None and not held and time.monotonic() - began < 0.8:
                held = freeze.stop_when_idle(pid, client_port, server_port)
                if not held:
                    await asyncio.sleep(0.005)
            for _ in range(10):
                await ws.send(audio_frame(tone(20, 16000), 16000))
            await self._say_spoken(ws, "the first answer", segment)
            await ws.send(rtvi("bot-stopped-speaking"))
            await asyncio.sleep(max(0.0, began + 1.5 - time.monotonic()))
        finally:
            if held and pid is not None:
                freeze.resume(pid)
        self.starved.append(held)
        return False

    async def _say_spoken(self, ws: ServerConnection, text: str, segment: int) -> None:
        await ws.send(rtvi("bot-output", {"text": text, "segment_id": segment, "will_be_spoken": True,
                                          "spoken_status": "completed"}))

    async def _echo(self, ws: ServerConnection, document: dict[str, Any]) -> None:
        data = document.get("data") or {}
        if document.get("type") == "dtmf":
            await self._say(ws, f"pressed {' '.join(data.get('buttons', []))}")
        elif document.get("type") == "send-text":
            text = str(data.get("content", ""))
            if "weather" in text:
                await ws.send(rtvi("bot-llm-started"))
                await ws.send(rtvi("bot-llm-stopped"))
                await ws.send(rtvi("llm-function-call", {"function_name": "get_weather", "tool_call_id": "call_1",
                                                         "args": {"city": "Oslo"}}))
            else:
                await self._say(ws, f"you said: {text}")
        elif document.get("type") == "llm-function-call-result":
            await self._say(ws, f"the weather: {json.dumps(data.get('result'))}")
