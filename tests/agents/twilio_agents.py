"""Small Twilio Media Streams agents written here, each on its path, for what the pipecat bot does not do (marks)
or does not do wrong (silence, a drop, a flood). Each records what tamesu sent it.

- `/marks`: plays 1 s of tone in 20 ms media messages at real-time pace, then sends a mark `m1`; it answers a
  dtmf digit with 1 s of tone and a mark `d<digit>`;
- `/silent`: never says anything;
- `/drop`: closes the socket right after `start`;
- `/flood`: sends tone as fast as the socket takes it, forever;
- `/stray`: greets with 0.3 s of tone; answers the caller's first utterance with 3 s of tone, and when the caller
  talks over it stops (a `clear`) and 0.1 s later sends 40 ms more of it (late, as a loaded agent's last chunk
  comes); 0.6 s after the caller's next utterance ends (its 0.4 s of quiet heard) it answers with 0.3 s of tone;
- `/pause`: greets with 0.3 s of tone; answers the caller's first utterance (its 0.4 s of quiet heard) 0.3 s later
  with 0.5 s of tone, 1.2 s of nothing and 0.5 s more (a reply with a pause in it), and the next one 0.6 s after
  it ends with 0.3 s of tone;
- `/cut`: greets with 0.3 s of tone; answers the caller's first utterance with tone and closes the socket 0.5 s
  into it, in the middle of its sound;
- `/listens`: never greets; answers each utterance of the caller (its 0.4 s of quiet heard) 0.3 s later with 0.3 s
  of tone;
- `/eager`: greets with 0.3 s of tone; answers 0.4 s into the caller's first utterance, while the caller still
  speaks, with 0.3 s of tone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from agents.end_of_speech import EndOfSpeech
from agents.ws_thread import ThreadedWebsocketServer
from tamesu.audio.codecs import decode, encode

RATE = 8000


def tone(ms: int) -> bytes:
    t = np.arange(RATE * ms // 1000) / RATE
    return encode((np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16), "mulaw")


class TwilioAgents(ThreadedWebsocketServer):
    def __init__(self) -> None:
        self.received: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        super().__init__("twilio-agents")

    def events(self, path: str) -> list[dict[str, Any]]:
        return [event for _at, event in self.received.get(path, [])]

    async def _speak(self, ws: ServerConnection, sid: str, ms: int, mark: str) -> None:
        audio = tone(ms)
        for k in range(0, len(audio), 160):
            payload = base64.b64encode(audio[k:k + 160]).decode()
            await ws.send(json.dumps({"event": "media", "streamSid": sid, "media": {"payload": payload}}))
            await asyncio.sleep(0.02)
        await ws.send(json.dumps({"event": "mark", "streamSid": sid, "mark": {"name": mark}}))

    async def _later(self, ws: ServerConnection, sid: str, after_s: float, ms: int, mark: str) -> None:
        with contextlib.suppress(ConnectionClosed):  # the caller may hang up first
            await asyncio.sleep(after_s)
            await self._speak(ws, sid, ms, mark)

    async def _cut(self, ws: ServerConnection, sid: str) -> None:
        audio = tone(500)
        with contextlib.suppress(ConnectionClosed):
            for k in range(0, len(audio), 160):
                payload = base64.b64encode(audio[k:k + 160]).decode()
                await ws.send(json.dumps({"event": "media", "streamSid": sid, "media": {"payload": payload}}))
                await asyncio.sleep(0.02)
            await ws.close()

    async def _paused(self, ws: ServerConnection, sid: str) -> None:
        await self._later(ws, sid, 0.3, 500, "r1a")
        await self._later(ws, sid, 1.2, 500, "r1b")

    async def _handler(self, ws: ServerConnection) -> None:
        path = ws.request.path if ws.request is not None else "/"
        log = self.received.setdefault(path, [])
        sid = ""
        caller = EndOfSpeech(quiet_frames=20)
        utterances = 0
        reply: asyncio.Task[None] | None = None
        try:
            async for raw in ws:
                event = json.loads(raw)
                log.append((time.monotonic(), event))
                kind = event.get("event")
                if kind == "start":
                    sid = event["streamSid"]
                    if path == "/drop":
                        await ws.close()
                        return
                    if path == "/marks":
                        await self._speak(ws, sid, 1000, "m1")
                    if path in ("/stray", "/pause", "/eager", "/cut"):
                        await self._speak(ws, sid, 300, "greeting")
                    if path == "/pcm":  # Twilio's mu-law agreed, pcm16 sent: a bridge that forgot to encode
                        t = np.arange(RATE) / RATE
                        audio = (np.sin(2 * np.pi * 440 * t) * 8000).astype("<i2").tobytes()
                        for k in range(0, len(audio), 320):
                            payload = base64.b64encode(audio[k:k + 320]).decode()
                            await ws.send(json.dumps({"event": "media", "streamSid": sid,
                                                      "media": {"payload": payload}}))
                            await asyncio.sleep(0.02)
                    if path == "/flood":
                        chunk = base64.b64encode(tone(1000)).decode()
                        while True:
                            await ws.send(json.dumps({"event": "media", "streamSid": sid,
                                                      "media": {"payload": chunk}}))
                            await asyncio.sleep(0.01)
                elif kind == "media" and path == "/stray":
                    pcm = decode(base64.b64decode(event["media"]["payload"]), "mulaw").astype("<i2").tobytes()
                    utterances += caller.heard(pcm)
                    if utterances == 1 and reply is None:
                        reply = asyncio.create_task(self._speak(ws, sid, 3000, "r1"))
                    elif caller.loud and reply is not None and not reply.done():
                        reply.cancel()
                        await ws.send(json.dumps({"event": "clear", "streamSid": sid}))
                        await asyncio.sleep(0.1)
                        await self._speak(ws, sid, 40, "stray")
                    elif utterances == 2:
                        utterances += 1
                        await asyncio.sleep(0.6)
                        await self._speak(ws, sid, 300, "r2")
                elif kind == "media" and path == "/eager":
                    pcm = decode(base64.b64decode(event["media"]["payload"]), "mulaw").astype("<i2").tobytes()
                    caller.heard(pcm)
                    utterances += caller.loud
                    if utterances == 20:  # 0.4 s of the caller's speech
                        reply = asyncio.create_task(self._later(ws, sid, 0.0, 300, "over"))
                elif kind == "media" and path == "/listens":
                    pcm = decode(base64.b64decode(event["media"]["payload"]), "mulaw").astype("<i2").tobytes()
                    if caller.heard(pcm):
                        reply = asyncio.create_task(self._later(ws, sid, 0.3, 300, "r"))
                elif kind == "media" and path == "/cut":
                    pcm = decode(base64.b64decode(event["media"]["payload"]), "mulaw").astype("<i2").tobytes()
                    if caller.heard(pcm):
                        reply = asyncio.create_task(self._cut(ws, sid))
                elif kind == "media" and path == "/pause":
                    pcm = decode(base64.b64decode(event["media"]["payload"]), "mulaw").astype("<i2").tobytes()
                    if caller.heard(pcm):
                        utterances += 1
                        reply = asyncio.create_task(self._paused(ws, sid) if utterances == 1 else
                                                    self._later(ws, sid, 0.6, 300, "r2"))
                elif kind == "dtmf" and path == "/marks":
                    await self._speak(ws, sid, 1000, "d" + event["dtmf"]["digit"])
        except ConnectionClosed:
            pass
