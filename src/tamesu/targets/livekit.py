"""The `livekit` target: tamesu joins a LiveKit room as the caller and talks to the agent participant there.

tamesu mints its own access token from `api_key`/`api_secret` (room join for `room`, with the agent `dispatch`
in the token's room configuration when one is named), connects with the official `livekit` rtc SDK, and waits
for the agent: the first remote participant whose identity matches `agent_identity` (a regex), or whose kind is
an agent when none is given.

- `mode: text`: each user turn is a text stream on `topic` (default `lk.chat`, what LiveKit Agents read); the
  agent's answer is what it sends on `reply_topic` (default `lk.transcription`) as text streams or data
  packets, until `idle` passes without more.
- `mode: audio`: tamesu publishes a microphone track and the persona speaks into it through the voice toolkit
  (voice, behaviours, real-time pace); the agent's audio track is heard on the playback clock, recorded,
  transcribed, and its turn ends after `idle` of silence. A reply something reads during the call (a script's next
  `wait_for`, a capture, a simulator) is transcribed within the turn's `turn_timeout` from when it was heard out
  (else the run is the environment's error: not decided); the others once the call is over. `dtmf` steps go out as
  LiveKit DTMF (RFC 4733 codes); digits the agent publishes are recorded for `dtmf_received`.

No LiveKit server can be installed on tamesu's own machines, so this target is tested against a double of
the SDK's boundary (`Sdk`, below: the room, its events, text streams, data packets and audio frames), plus an
end-to-end test that runs only when `LIVEKIT_URL`, `LIVEKIT_API_KEY` and `LIVEKIT_API_SECRET` are set. An
unreachable server is an infrastructure error (exit 3) with one line.

Traces (telemetry.traceparent): the conversation's `traceparent` is a participant attribute of tamesu's caller, set in
the token it joins with (`participant.attributes["traceparent"]` for the agent); in text mode each user turn's
text stream also carries the turn's own in its attributes, and the turn records it. An audio turn records the
conversation's.

Events: `transport`, `conversation_trace`, `agent_joined`, `agent_left`, `livekit_dtmf` (as `sip_dtmf` for
`dtmf_received`), `audio`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from tamesu.audio import measured
from tamesu.conversation import AgentTurn, Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.urls import shown_url
from tamesu.plugins import register
from tamesu.targets.audio.heard import read_after_call, take_what_was_heard, words_by
from tamesu.targets.audio.listen import POLL_S, listen
from tamesu.targets.base import Target, TargetSpec
from tamesu.targets.realtime.spec import audio_mode_available
from tamesu.types import Strict, YamlFloat

__all__ = ["LiveKitSpec", "LiveKitTarget", "Sdk"]

RATE = 16000
DTMF_CODES = {**{str(n): n for n in range(10)}, "*": 10, "#": 11}


class DispatchSpec(Strict):
    agent_name: str
    """The LiveKit Agents worker's agent name to dispatch into the room."""
    metadata: str = ""
    """The dispatch's metadata string, handed to the agent's job."""


class LiveKitSpec(TargetSpec):
    url: str
    """The server's websocket URL (`wss://project.livekit.cloud`, `ws://127.0.0.1:7880`)."""
    api_key: str
    """The LiveKit API key, as `{{secrets.X}}`: with `api_secret`, tamesu mints the token it joins with."""
    api_secret: str
    """As `{{secrets.X}}`: tamesu mints its own token with them and never writes them anywhere."""
    room: str = "tamesu-{{run.id}}"
    """The room tamesu joins (and the agent is dispatched to); templates allowed, default one room per run."""
    identity: str = "tamesu-caller"
    """The participant identity tamesu joins as."""
    dispatch: DispatchSpec | None = None
    """An agent to dispatch into the room (LiveKit Agents' explicit dispatch), in the token."""
    agent_identity: str | None = None
    """A regex on the participant identity that is the agent; default: the first agent participant."""
    mode: Literal["text", "audio"] = "text"
    """`text`: turns are text streams on `topic`; `audio`: the persona speaks on a microphone track and the agent's
    audio is heard."""
    topic: str = "lk.chat"
    """The text stream topic the user's turns are sent on (`text` mode)."""
    reply_topic: str = "lk.transcription"
    """The topic the agent's answers arrive on, as text streams or data (`text` mode)."""
    idle: YamlFloat = Field(1.2, gt=0, le=60)
    """Seconds without more of the agent's text or speech that end its turn."""
    join_timeout: YamlFloat = Field(15.0, gt=0, le=600)
    """How long to wait for the agent to join the room before the run is an infrastructure error."""

    @model_validator(mode="after")
    def _audio_available(self) -> LiveKitSpec:
        audio_mode_available(self.mode)  # the voice extra is imported only as audio is heard: say so up front
        return self


@dataclass
class Sdk:
    """Where the target meets the LiveKit SDK: the real one by default, a documented double in tests."""

    room: Callable[[], Any]
    token: Callable[[LiveKitSpec, str, str, str, dict[str, str]], str]
    """(spec, api key, api secret, room, participant attributes) -> the access token tamesu joins with."""
    audio_source: Callable[[int], Any]
    """`AudioSource(rate, channels=1)`: capture_frame(frame) with 20 ms of pcm16."""
    local_track: Callable[[Any], Any]
    audio_frames: Callable[[Any], AsyncIterator[bytes]]
    """The agent's audio track as pcm16 mono at RATE, one frame at a time."""
    frame: Callable[[bytes], Any]


def real_sdk() -> Sdk:
    from livekit import api, rtc

    # the SDK logs each connection retry as a warning; the target's own error line says how it ended
    quiet = logging.getLogger("livekit")
    if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    def token(spec: LiveKitSpec, key: str, secret: str, room: str, attributes: dict[str, str]) -> str:
        grant = api.VideoGrants(room_join=True, room=room, can_publish=True, can_subscribe=True,
                                can_publish_data=True)
        made = api.AccessToken(key, secret).with_identity(spec.identity).with_name("tamesu").with_grants(grant)
        if attributes:
            made = made.with_attributes(attributes)  # the caller's participant attributes, set as it joins
        if spec.dispatch is not None:
            made = made.with_room_config(api.RoomConfiguration(agents=[api.RoomAgentDispatch(
                agent_name=spec.dispatch.agent_name, metadata=spec.dispatch.metadata)]))
        return str(made.to_jwt())

    async def frames(track: Any) -> AsyncIterator[bytes]:
        stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
        try:
            async for event in stream:
                yield bytes(event.frame.data.cast("B"))
        finally:
            await stream.aclose()

    return Sdk(room=rtc.Room, token=token, audio_source=lambda rate: rtc.AudioSource(rate, 1),
               local_track=lambda source: rtc.LocalAudioTrack.create_audio_track("tamesu-mic", source),
               audio_frames=frames,
               frame=lambda pcm: rtc.AudioFrame(pcm, RATE, 1, len(pcm) // 2))


@dataclass
class _Heard:
    texts: list[tuple[float, str]] = field(default_factory=list)
    audio: list[tuple[float, bytes]] = field(default_factory=list)
    dtmf: list[tuple[float, str]] = field(default_factory=list)


@register("targets", "livekit")
class LiveKitTarget(Target[LiveKitSpec]):
    kind = "livekit"
    metric_names = measured.RECORDED
    not_measured: ClassVar[dict[str, str]] = {
        measured.STOP: "the persona never talks over its agent (interrupt_probability has no effect on it)"}
    hears_dtmf = True
    audio = text_mode = dtmf = True
    Spec = LiveKitSpec
    spec: LiveKitSpec
    sdk_factory: Callable[[], Sdk] = staticmethod(real_sdk)  # tests put the double here

    def __init__(self, spec: LiveKitSpec, name: str) -> None:
        super().__init__(spec, name)
        self._sdk: Sdk | None = None
        self._room: Any = None
        self._agent: Any = None
        self._joined = asyncio.Event()
        self._heard = _Heard()
        self._seen_texts = self._seen_audio = self._seen_dtmf = 0
        self._source: Any = None
        self._voice: Any = None
        self._listening: set[asyncio.Task[None]] = set()
        self._line: asyncio.Future[None] | None = None
        self._line_stop = asyncio.Event()
        self._turn_traced = False
        """This turn's text stream carried the turn's `traceparent`."""
        self._after_call: list[AgentTurn] = []
        """Replies nothing read during the call: their text is what was heard, transcribed when it ends."""

    async def _open(self, session: Session) -> None:
        spec = self.spec
        try:
            self._sdk = self.sdk_factory()
        except ImportError:
            raise InfraError(f"{self._what}: the livekit target needs pip install 'tamesu[livekit]'") from None
        render = session.context.render_text
        url, room_name = session.context.render_url(spec.url), render(spec.room)
        trace = session.conversation_trace
        attributes = {"traceparent": trace.traceparent} if trace is not None else {}
        token = self._sdk.token(spec, render(spec.api_key), render(spec.api_secret), room_name, attributes)
        session.redactor.add(token)  # a bearer credential for the room: an SDK error may quote the URL it joined by
        self._room = self._sdk.room()
        self._room.on("participant_connected", self._participant)
        self._room.on("participant_disconnected", self._left)
        self._room.on("track_subscribed", self._track)
        self._room.on("data_received", self._data)
        self._room.on("sip_dtmf_received", self._dtmf)
        self._room.register_text_stream_handler(spec.reply_topic, self._text_stream)
        shown = shown_url(url, session.redactor.text, query=True)  # never a user:password@ written in it
        try:
            async with asyncio.timeout(spec.connect.timeout + spec.join_timeout):
                await self._room.connect(url, token)
        except TimeoutError:
            raise InfraError(f"{self._what}: no connection to {shown} within {spec.connect.timeout:g}s") from None
        except Exception as exc:  # the SDK raises its own ConnectError, or OSError underneath
            raise InfraError(f"{self._what}: cannot reach {shown}: {session.redactor.text(str(exc))[:200]}") from None
        session.event("transport", binding="livekit", url=shown, room=room_name, mode=spec.mode)
        if trace is not None:
            session.event("conversation_trace", trace_id=trace.trace_id,
                          sent_in=["token participant attributes traceparent"])
        for participant in list(self._room.remote_participants.values()):
            self._participant(participant)
        try:
            await asyncio.wait_for(self._joined.wait(), spec.join_timeout)
        except TimeoutError:
            raise InfraError(f"{self._what}: no agent joined room {room_name} within {spec.join_timeout:g}s") \
                from None
        if spec.mode == "audio":
            from tamesu.audio.conversation import AudioConversation
            from tamesu.audio.formats import AudioFormat

            self._voice = AudioConversation(session, send=AudioFormat("pcm16", RATE),
                                            receive=AudioFormat("pcm16", RATE))
            self._source = self._sdk.audio_source(RATE)
            await self._room.local_participant.publish_track(self._sdk.local_track(self._source))

    # ---- what the room tells us --------------------------------------------------------------------

    def _is_agent(self, participant: Any) -> bool:
        if self.spec.agent_identity is not None:
            return re.search(self.spec.agent_identity, str(participant.identity)) is not None
        kind = getattr(participant, "kind", None)
        return kind is None or "AGENT" in str(kind).upper() or kind == 4  # ParticipantKind.AGENT

    def _participant(self, participant: Any) -> None:
        if self._agent is None and self._is_agent(participant):
            self._agent = participant
            if self._session is not None:
                self._session.event("agent_joined", identity=str(participant.identity))
            self._joined.set()

    def _left(self, participant: object) -> None:
        if participant is self._agent and self._session is not None:
            self._session.event("agent_left", identity=str(participant.identity))
            self._agent = None

    def _track(self, track: object, publication: object, participant: object) -> None:
        is_audio = "AUDIO" in str(getattr(track, "kind", "audio")).upper()
        if participant is not self._agent or self._sdk is None or not is_audio:
            return
        task = asyncio.ensure_future(self._hear(track))
        self._listening.add(task)
        task.add_done_callback(self._listening.discard)

    async def _hear(self, track: object) -> None:
        assert self._sdk is not None
        async for pcm in self._sdk.audio_frames(track):
            self._heard.audio.append((time.monotonic(), pcm))

    def _data(self, packet: Any) -> None:
        if getattr(packet, "topic", "") == self.spec.reply_topic and self._from_agent(packet):
            self._heard.texts.append((time.monotonic(), bytes(packet.data).decode(errors="replace")))

    def _text_stream(self, reader: Any, participant_identity: str) -> None:
        async def read() -> None:
            text = await reader.read_all()
            self._heard.texts.append((time.monotonic(), str(text)))

        task = asyncio.ensure_future(read())
        self._listening.add(task)
        task.add_done_callback(self._listening.discard)

    def _dtmf(self, event: object) -> None:
        self._heard.dtmf.append((time.monotonic(), str(getattr(event, "digit", ""))))

    def _from_agent(self, packet: object) -> bool:
        sender = getattr(packet, "participant", None)
        return self._agent is None or sender is None or sender is self._agent

    # ---- turns -------------------------------------------------------------------------------------

    def turn_trace_id(self, session: Session) -> str | None:
        traced, self._turn_traced = self._turn_traced, False
        if traced and session.trace is not None:
            return session.trace.trace_id
        return session.conversation_trace.trace_id if session.conversation_trace is not None else None

    async def send(self, turn: UserTurn) -> AgentTurn:
        assert self._session is not None and self._room is not None
        session = self._session
        if self._agent is None:
            raise TurnError("the agent left the room")
        reply = AgentTurn(sent_at_ms=session.now_ms())
        if turn.dtmf:
            for digit in turn.dtmf:
                await self._room.local_participant.publish_dtmf(code=DTMF_CODES.get(digit, 0), digit=digit)
        said = turn.text
        if self.spec.mode == "text":
            if said:
                # a text stream's attributes carry the turn's trace to the agent that reads it
                attributes = {"traceparent": session.trace.traceparent} if session.trace is not None else None
                await self._room.local_participant.send_text(said, topic=self.spec.topic, attributes=attributes)
                self._turn_traced = attributes is not None
            reply.sent_at_ms = session.now_ms()
            return await self._read_text(reply)
        await self._close_line()
        if said:
            await self._voice.speak(said, self._send_frame)
        # a caller's microphone stays open between utterances, so the agent's VAD hears the pause
        self._line_stop = asyncio.Event()
        self._line = asyncio.ensure_future(self._voice.keep_line_open(self._send_frame, self._line_stop))
        reply.sent_at_ms = session.now_ms()
        return await self._read_audio(reply)

    async def _close_line(self) -> None:
        if self._line is not None:
            self._line_stop.set()
            with contextlib.suppress(Exception):
                await self._line
            self._line = None

    async def _send_frame(self, pcm: bytes) -> None:
        assert self._sdk is not None
        await self._source.capture_frame(self._sdk.frame(pcm))

    async def _read_text(self, turn: AgentTurn) -> AgentTurn:
        assert self._session is not None
        started, parts, last = time.monotonic(), [], None
        while True:
            self.poll()
            fresh = self._heard.texts[self._seen_texts:]
            self._seen_texts = len(self._heard.texts)
            for at, text in fresh:
                if turn.first_token_at_ms is None:
                    turn.first_token_at_ms = self.to_ms(at)
                parts.append(text)
                last = at
            now = time.monotonic()
            if last is not None and now - last >= self.spec.idle:
                break
            if self._agent is None:
                turn.ended = True
                break
            if now - started > self.spec.turn_timeout:
                if not parts:
                    raise TurnError(f"the agent sent nothing on {self.spec.reply_topic} within "
                                    f"{self.spec.turn_timeout:g}s", limit_s=self.spec.turn_timeout,
                                    started_at_ms=self.to_ms(started))
                break
            await asyncio.sleep(POLL_S)
        turn.text = " ".join(p.strip() for p in parts if p.strip())
        turn.raw = [{"topic": self.spec.reply_topic, "text": p} for p in parts]
        # the reply was complete at its last message: the idle wait after it is tamesu's, not the agent's
        turn.completed_at_ms = self.to_ms(last) if last is not None else self._session.now_ms()
        return turn

    async def _read_audio(self, turn: AgentTurn) -> AgentTurn:
        assert self._session is not None
        session, started = self._session, time.monotonic()
        heard = await listen(self, self._voice, turn, idle=self.spec.idle, turn_timeout=self.spec.turn_timeout,
                             now_ms=session.now_ms)
        if read_after_call(session, turn, self._after_call):
            record, measures = self._voice.end_turn(heard=None)
            turn.audio, turn.measures = record, measures
            return turn
        # here, not at the top: the speech-to-text imports numpy (the voice extra), which a text-mode target, and
        # `schema`/`init` reading every type's spec, do without (124 ms of each)
        from tamesu.audio.clip import Clip
        from tamesu.audio.level import pcm16

        # within turn_timeout of its end, as on every voice target (`words_by`): counted from the turn's start, a
        # reply that took most of it to say left its transcription seconds (undecided, exit 3)
        turn.text = await words_by(self._voice, Clip(pcm16(heard.pcm), RATE), self.to_ms(heard.spoke_at or started),
                                   None, self.spec.turn_timeout) or ""
        record, measures = self._voice.end_turn(heard=turn.text)
        turn.audio, turn.measures = record, measures
        return turn

    # ---- the room as the listening loop's `Line` (targets.audio.listen) ----

    def fresh_audio(self) -> list[tuple[float, bytes]]:
        fresh = self._heard.audio[self._seen_audio:]
        self._seen_audio = len(self._heard.audio)
        return fresh

    def put_back(self, count: int) -> None:
        self._seen_audio -= count

    def call_over(self) -> bool:
        return self._agent is None

    def poll(self) -> float | None:
        assert self._session is not None
        digits = self._heard.dtmf[self._seen_dtmf:]
        for at, digit in digits:
            self._session.event("sip_dtmf", digit=digit, at=round(self.to_ms(at), 3), via="livekit")
        self._seen_dtmf = len(self._heard.dtmf)
        return digits[-1][0] if digits else None

    def to_ms(self, monotonic_s: float) -> float:
        assert self._session is not None
        return self._session.now_ms() - (time.monotonic() - monotonic_s) * 1000

    async def close(self) -> None:
        await self._close_line()
        room, self._room = self._room, None
        for task in list(self._listening):
            task.cancel()
        if self._listening:
            await asyncio.gather(*self._listening, return_exceptions=True)
        if self._voice is not None:
            with contextlib.suppress(Exception):
                await self._voice.finish()
            take_what_was_heard(self._after_call)
            self._voice = None
        if room is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(room.disconnect(), 5)
