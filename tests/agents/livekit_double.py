"""A double of the LiveKit SDK's boundary (what `tamesu.targets.livekit.Sdk` names), with a scripted agent in
the room. No LiveKit server can be installed here; this is what the target is tested against. Its behaviour:

- `connect(url, token)`: checks the token as a server would (HS256 with the API secret, a `video` grant to
  join this room); refuses a URL whose host is `unreachable`. Then the agent joins (`participant_connected`,
  kind AGENT, identity `agent-bella`), after `join_delay` seconds.
- text: a `send_text` on `lk.chat` is answered by the agent on `lk.transcription`, as a text stream (through
  the handler registered for that topic), with `reply(text)`; "bye" makes the agent leave the room.
- audio: the agent publishes an audio track at once (`track_subscribed`). Our microphone frames reach it
  through `AudioSource.capture_frame`; 600 ms of silence after speech ends our utterance, and the agent then
  speaks `reply(what it transcribed)` into its track at real-time pace (20 ms frames). A user frame during its
  reply stops it (a barge-in), as a LiveKit agent's interruption does. `replies_spoken` counts the replies
  whose last sound (their last frame louder than speech) went out, so a test can tell a whole reply heard in
  one turn from a turn that ended at a pause inside it.
- dtmf: `publish_dtmf` digit 9 is answered by the digits 1, 2, 3 (`sip_dtmf_received` events).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import numpy as np

from tamesu.audio.level import is_speech
from tamesu.targets.livekit import RATE, Sdk

FRAME = RATE // 50 * 2
ParticipantKindAgent = 4


def reply(heard: str) -> str:
    if "balance" in heard.lower():
        return "Your balance is forty two dollars."
    return "Hello, this is Bella. How can I help you today?"


@dataclass
class Participant:
    identity: str
    kind: int = 0


@dataclass
class Track:
    kind: str = "KIND_AUDIO"
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)


class TextReader:
    def __init__(self, text: str) -> None:
        self.text = text

    async def read_all(self) -> str:
        return self.text


class AudioSource:
    def __init__(self, room: Room) -> None:
        self.room = room

    async def capture_frame(self, frame: bytes) -> None:
        await self.room.heard_frame(frame)


@dataclass
class DtmfEvent:
    digit: str
    code: int


class LocalParticipant:
    def __init__(self, room: Room) -> None:
        self.room = room
        self.published: list[Any] = []
        self.texts: list[tuple[str, str]] = []
        self.text_attributes: list[dict[str, str] | None] = []
        self.dtmf: list[str] = []

    async def send_text(self, text: str, *, topic: str = "", attributes: dict[str, str] | None = None) -> None:
        self.texts.append((topic, text))
        self.text_attributes.append(attributes)
        if topic == "lk.chat":
            await asyncio.sleep(0.05)
            self.room.emit_text("lk.transcription", reply(text))
            if "bye" in text.lower():
                self.room.agent_leaves()

    async def publish_track(self, track: Any) -> None:
        self.published.append(track)

    async def publish_dtmf(self, *, code: int, digit: str) -> None:
        self.dtmf.append(digit)
        if digit == "9":
            for answer in "123":
                self.room.emit("sip_dtmf_received", DtmfEvent(answer, int(answer)))


class Room:
    def __init__(self, secret: str, room: str, join_delay: float = 0.1) -> None:
        self.secret, self.room_name, self.join_delay = secret, room, join_delay
        self.handlers: dict[str, list[Callable[..., Any]]] = {}
        self.text_handlers: dict[str, Callable[..., Any]] = {}
        self.remote_participants: dict[str, Participant] = {}
        self.local_participant = LocalParticipant(self)
        self.agent = Participant("agent-bella", ParticipantKindAgent)
        self.agent_track = Track()
        self.tokens: list[dict[str, Any]] = []
        self.connected_url: str | None = None
        self._speech: list[bytes] = []
        self._quiet_frames = 0
        self._speaking: asyncio.Task[None] | None = None
        self.replies_spoken = 0
        self.disconnected = False

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def emit(self, event: str, *args: Any) -> None:
        for handler in self.handlers.get(event, []):
            handler(*args)

    def register_text_stream_handler(self, topic: str, handler: Callable[..., Any]) -> None:
        self.text_handlers[topic] = handler

    def emit_text(self, topic: str, text: str) -> None:
        if topic in self.text_handlers:
            self.text_handlers[topic](TextReader(text), self.agent.identity)

    async def connect(self, url: str, token: str) -> None:
        if "unreachable" in url:
            raise ConnectionError(f"failed to connect to {url}: connection refused")
        claims = jwt.decode(token, self.secret, algorithms=["HS256"])
        assert claims["video"]["roomJoin"] and claims["video"]["room"] == self.room_name, claims
        self.tokens.append(claims)
        self.connected_url = url
        asyncio.get_running_loop().call_later(self.join_delay, self._agent_joins)

    def _agent_joins(self) -> None:
        self.remote_participants[self.agent.identity] = self.agent
        self.emit("participant_connected", self.agent)
        self.emit("track_subscribed", self.agent_track, None, self.agent)

    def agent_leaves(self) -> None:
        self.remote_participants.pop(self.agent.identity, None)
        self.emit("participant_disconnected", self.agent)
        self.agent_track.queue.put_nowait(None)

    async def disconnect(self) -> None:
        self.disconnected = True
        self.agent_track.queue.put_nowait(None)

    # -- the agent's ears and mouth ------------------------------------------------------------------

    async def heard_frame(self, pcm: bytes) -> None:
        loud = float(np.sqrt(np.mean(np.frombuffer(pcm, "<i2").astype(np.float64) ** 2))) > 300
        if loud and self._speaking is not None and not self._speaking.done():
            self._speaking.cancel()  # talked over: the agent stops
        if loud:
            self._speech.append(pcm)
            self._quiet_frames = 0
        elif self._speech:
            self._quiet_frames += 1
            if self._quiet_frames >= 30:
                said, self._speech = b"".join(self._speech), []
                self._speaking = asyncio.ensure_future(self._answer(said))

    async def _answer(self, said: bytes) -> None:
        from tamesu.audio import stt, tts
        from tamesu.audio.clip import Clip

        heard = await asyncio.to_thread(stt.transcribe, Clip(np.frombuffer(said, "<i2").astype(np.int16), RATE))
        clip, _ = await tts.say(reply(heard.text))
        pcm = clip.at(RATE).samples.astype("<i2").tobytes()
        frames = [pcm[offset:offset + FRAME].ljust(FRAME, b"\0") for offset in range(0, len(pcm), FRAME)]
        last_sound = max((n for n, frame in enumerate(frames) if is_speech(frame)), default=-1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n, frame in enumerate(frames):
            await self.agent_track.queue.put(frame)
            if n == last_sound:
                self.replies_spoken += 1
            delay = started + (n + 1) * 0.02 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)


def double(secret: str, room: str, rooms: list[Room]) -> Callable[[], Sdk]:
    """An `Sdk` factory whose rooms are appended to `rooms` for the test to look at."""

    def token(spec: Any, key: str, secret_: str, room_name: str, attributes: dict[str, str]) -> str:
        from tamesu.targets.livekit import real_sdk

        # the real minting, checked by the double
        return real_sdk().token(spec, key, secret_, room_name, attributes)

    def make_room() -> Room:
        made = Room(secret, room)
        rooms.append(made)
        return made

    async def frames(track: Track) -> AsyncIterator[bytes]:
        silence = bytes(FRAME)
        while True:
            try:
                frame = await asyncio.wait_for(track.queue.get(), 0.02)
            except TimeoutError:
                frame = silence  # an open track carries silence between words
            if frame is None:
                return
            yield frame

    def source(_rate: int) -> AudioSource:
        return AudioSource(rooms[-1])

    return lambda: Sdk(room=make_room, token=token, audio_source=source, local_track=lambda s: s,
                       audio_frames=frames, frame=lambda pcm: pcm)


