"""The `twilio` target: an agent built for Twilio Media Streams, with tamesu playing Twilio's side of the socket.

tamesu connects to the agent's stream `url` as Twilio does and sends, in Twilio's own JSON: `connected`, `start`
(account, call and stream ids, `tracks: [inbound]`, `mediaFormat` audio/x-mulaw 8000 Hz mono, and
`customParameters`: `parameters` with `from` and `to` added, as a TwiML `<Parameter>` passes them), then
`media` (mu-law 8 kHz, 20 ms per message, base64, at real-time pace, with chunk numbers and timestamps: the
persona's speech, and silence between utterances as a live call has), `dtmf` for a `dtmf` step, `mark` back
for each mark the agent sends once the audio before it has played (at once when the agent sends `clear`), and
`stop` when the call ends. From the agent it reads `media` (its speech), `mark` and `clear` (a barge-in).

Traces (telemetry.traceparent): the conversation's `traceparent` goes on the websocket handshake and in
`start.customParameters.traceparent` (where a Twilio stream's agent reads what it knows of the call); every
turn records that trace id. A `traceparent` in `parameters` is the suite's own: it wins in both places.

The call's turns, barge-in and failures are the audio socket's (`_audio_socket`): the agent's greeting is the
first agent turn (`greeting: false`: the caller speaks first), a turn ends after `idle` of silence following the
agent's speech.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid

from pydantic import ConfigDict, Field, field_validator, model_validator

from tamesu.conversation import AgentTurn, Session, TurnError
from tamesu.matching import quoted
from tamesu.plugins import register
from tamesu.targets.audio.sniffer import EncodingSniffer
from tamesu.targets.audio.socket import AudioSocketTarget, socket_metric_names
from tamesu.targets.audio.wire import Incoming, Wire
from tamesu.targets.base import TargetSpec
from tamesu.targets.realtime.spec import require_audio_extra, websocket_url
from tamesu.types import Duration, YamlBool

__all__ = ["TwilioSpec", "TwilioTarget"]


class TwilioSpec(TargetSpec):
    model_config = ConfigDict(**{**TargetSpec.model_config, "populate_by_name": True})

    url: str
    """The agent's Media Streams websocket (what `<Stream url=...>` names in TwiML)."""
    from_: str | None = Field(None, alias="from")
    """The caller's number, sent as the stream's `from` custom parameter (unless `parameters` has one); templates
    allowed."""
    to: str | None = None
    """The called number, sent as the stream's `to` custom parameter (unless `parameters` has one); templates
    allowed."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """The stream's custom parameters (templates), as the agent reads them from `start.customParameters`."""
    idle: Duration = 1.0
    """Silence after the agent's speech that ends its turn."""
    turn_timeout: Duration = Field(30.0, gt=0)
    greeting: YamlBool = True
    """The agent speaks first (its greeting is the first agent turn); false: it waits for the caller, who does."""

    @field_validator("url")
    @classmethod
    def _websocket(cls, url: str) -> str:
        return websocket_url(url, "a twilio url is ws:// or wss:// (the agent's Media Streams websocket)")

    @model_validator(mode="after")
    def _audio_available(self) -> TwilioSpec:
        require_audio_extra()
        return self


def _sid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex


class TwilioWire(Wire):
    def __init__(self, spec: TwilioSpec, session: Session, traceparent: str | None = None) -> None:
        from tamesu.audio.formats import AudioFormat

        self.send_format = self.receive_format = AudioFormat("mulaw", 8000)
        self.spec = spec
        self._sniffer = EncodingSniffer("mulaw", "Twilio Media Streams' encoding")
        self.account_sid = _sid("AC")
        self.call_sid = _sid("CA")
        self.stream_sid = _sid("MZ")
        self.sequence = 0
        self.chunk = 0
        render = session.context.render_text
        self.parameters = {k: render(v) for k, v in spec.parameters.items()}
        if spec.from_:
            self.parameters.setdefault("from", render(spec.from_))
        if spec.to:
            self.parameters.setdefault("to", render(spec.to))
        if traceparent is not None and "traceparent" not in self.parameters:
            # the stream's one slot for what the agent should know of the call (a <Parameter> on Twilio)
            self.parameters["traceparent"] = traceparent
            self.trace_carriers = ("start.customParameters.traceparent",)

    def _event(self, event: str, **body: object) -> str:
        self.sequence += 1
        message: dict[str, object] = {"event": event, "sequenceNumber": str(self.sequence), **body}
        if event != "connected":
            message["streamSid"] = self.stream_sid
        return json.dumps(message)

    def opening(self, session: Session) -> list[str | bytes]:
        connected = json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        start = self._event("start", start={
            "accountSid": self.account_sid, "streamSid": self.stream_sid, "callSid": self.call_sid,
            "tracks": ["inbound"], "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            "customParameters": self.parameters})
        return [connected, start]

    def frame(self, data: bytes) -> str:
        self.chunk += 1
        return self._event("media", media={"track": "inbound", "chunk": str(self.chunk),
                                           "timestamp": str((self.chunk - 1) * 20),
                                           "payload": base64.b64encode(data).decode()})

    def dtmf(self, digit: str) -> list[str | bytes]:
        return [self._event("dtmf", dtmf={"track": "inbound_track", "digit": digit})]

    def mark_echo(self, name: str) -> str:
        return self._event("mark", mark={"name": name})

    def closing(self) -> list[str | bytes]:
        return [self._event("stop", stop={"accountSid": self.account_sid, "callSid": self.call_sid})]

    def read(self, message: str | bytes) -> list[Incoming]:
        if isinstance(message, bytes):
            raise TurnError(f"the agent sent a binary message ({len(message)} bytes): Twilio Media Streams "
                            "carry JSON text messages only")
        try:
            event = json.loads(message)
        except ValueError:
            raise TurnError(f"the agent sent a message that is not JSON: {quoted(message, 200)}") from None
        if not isinstance(event, dict):
            raise TurnError(f"the agent sent a message that is not a JSON object: {quoted(message, 200)}")
        kind = event.get("event")
        if kind == "media":
            payload = (event.get("media") or {}).get("payload")
            try:
                audio = base64.b64decode(payload if isinstance(payload, str) else "", validate=True)
            except (binascii.Error, ValueError):
                raise TurnError("the agent's media.payload is not base64 audio") from None
            self._sniffer.check(audio)  # pcm16 payloads were heard as nothing: "the agent said nothing"
            return [Incoming("audio", audio)]
        if kind == "mark":
            return [Incoming("mark", value=(event.get("mark") or {}).get("name", ""))]
        if kind == "clear":
            return [Incoming("clear")]
        raise TurnError(f"the agent sent an event Twilio does not take: {str(kind)!r} (media, mark and clear are "
                        "what a stream accepts)")


@register("targets", "twilio")
class TwilioTarget(AudioSocketTarget[TwilioSpec]):
    kind = "twilio"
    metric_names = socket_metric_names(kind)
    Spec = TwilioSpec
    spec: TwilioSpec

    def __init__(self, spec: TwilioSpec, name: str) -> None:
        super().__init__(spec, name)
        self.idle_s = spec.idle

    async def greeting(self) -> AgentTurn | None:
        return await super().greeting() if self.spec.greeting else None

    def greets_first(self) -> bool:
        return self.spec.greeting

    def _url(self, session: Session) -> str:
        return session.context.render_url(self.spec.url)

    def _own_traceparent(self, session: Session, headers: dict[str, str]) -> str | None:
        """A `traceparent` in `parameters` is the suite's own: it also goes on the handshake."""
        own = self.spec.parameters.get("traceparent")
        return session.context.render_text(own) if own is not None else None

    def _make_wire(self, session: Session) -> Wire:
        wire = TwilioWire(self.spec, session, self.traceparent)
        session.event("twilio_stream", call_sid=wire.call_sid, stream_sid=wire.stream_sid,
                      parameters=sorted(wire.parameters))
        return wire
