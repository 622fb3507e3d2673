"""The `voice` target: any websocket that carries a call's audio, described rather than coded.

    type: voice
    url: ws://127.0.0.1:8080/socket
    audio: { encoding: pcm16 | mulaw | alaw, sample_rate: 16000, frames: binary | json, paced: false,
             send: {event: media, media: {payload: "{{message.audio}}"}},      # json frames: what tamesu sends
             receive: "$.media.payload" }                               # json frames: where the agent's audio is
    messages:                                                           # the protocol's JSON control messages
      open: {event: start}              # sent after connecting (one template, or a list)
      dtmf: {event: dtmf, digit: "{{message.digit}}"}
      close: {event: stop}
      interrupted: {when: {"$.event": clear}}   # a message whose JSONPaths all equal these values
      done: {when: {"$.type": "response.done"}}
      transcript: {when: {"$.type": transcript}, text: "$.text"}   # the agent's transcript of the user
      tool_calls: {when: {"$.type": function_call}, name: "$.name", args: "$.arguments", id: "$.id"}
      tool_result: {type: function_result, id: "{{message.id}}", output: "{{message.result}}"}
    tool_results: {lookup_order: {status: shipped}}                     # answers to the agent's tool calls
    session:
      open: {url: "https://api.example.com/calls", capture: {call: $.id}}   # then {{session.call}} in url

Binary frames carry the audio itself both ways (text messages are control); JSON frames carry it base64 at the
`receive` JSONPath. The call is the audio socket's (`_audio_socket`): greeting first (`greeting: false`: the
caller speaks first), turns end after `idle` of silence after the agent's speech (or `done`), barge-in with the
agent's `interrupted` recorded, DTMF through
`messages.dtmf`. A `tool_calls` message is recorded as a tool call (`tool_called`, `tool_sequence`), and answered
with `messages.tool_result` (`{{message.id}}`, `{{message.name}}`, `{{message.result}}`: the result as JSON text,
`{{message.output}}`: as a value) from `tool_results` when that template is given. `session.open` is made before
connecting; its captures are `{{session.NAME}}` in `url` and `headers`. Traces (telemetry.traceparent): the websocket
handshake carries the conversation's `traceparent` header (a `traceparent` in `headers` wins), and the message
templates may place it where the protocol has a slot: `{{trace.traceparent}}`, `{{trace.id}}` (in
`messages.open`, say); every turn records that trace id. A wrong configuration fails the turn
with the mismatch named: audio that is noise in the agreed encoding and speech in another, audio streamed steadily
faster than real time for the agreed sample rate (a burst is fine: it plays on the playback clock; with
`audio.paced: true` any audio faster than real time fails), JSON messages in which `receive` finds no audio.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Literal

import jsonpath
from pydantic import Field, field_validator, model_validator

from tamesu.conversation import AgentTurn, Session, ToolCall, TurnError
from tamesu.errors import TemplateError
from tamesu.matching import one_line, quoted
from tamesu.plugins import register
from tamesu.targets._tool_arguments import read_arguments
from tamesu.targets.audio.heard import Heard
from tamesu.targets.audio.sniffer import EncodingSniffer
from tamesu.targets.audio.socket import AudioSocketTarget, socket_metric_names
from tamesu.targets.audio.wire import Incoming, Wire
from tamesu.targets.base import SessionOpenSpec, SessionSpec, TargetSpec
from tamesu.targets.realtime.spec import answer, as_output, check_tool_results, require_audio_extra, websocket_url
from tamesu.targets.session_open import CapturedSocketAddress, open_session
from tamesu.telemetry.traceparent import TraceContext
from tamesu.types import Duration, HttpHeaders, JSONValue, Strict, YamlBool, YamlInt

__all__ = ["VoiceSpec", "VoiceTarget"]

_AUDIO = "\u0000tamesu-audio\u0000"


def _path(text: str) -> jsonpath.JSONPath | jsonpath.CompoundJSONPath:
    try:
        return jsonpath.compile(text)
    except jsonpath.JSONPathError as exc:
        raise ValueError(f"invalid JSONPath {text!r}: {str(exc).splitlines()[0] if str(exc) else exc}") from None


class AudioSpec(Strict):
    encoding: Literal["pcm16", "mulaw", "alaw"] = "pcm16"
    """The audio's encoding both ways: 16-bit PCM, or G.711 mu-law / a-law."""
    sample_rate: YamlInt = Field(16000, ge=8000, le=48000)
    """The audio's sample rate both ways, in Hz; tamesu sends and expects this rate."""
    frames: Literal["binary", "json"] = "binary"
    """`binary`: raw audio in binary websocket messages; `json`: base64 audio inside JSON messages (`send`,
    `receive`)."""
    send: object = None
    """json frames: the message for one 20 ms frame, `{{message.audio}}` where its base64 goes (and
    `{{message.digit}}` in `messages.dtmf`)."""
    receive: str | None = None
    """json frames: the JSONPath of the base64 audio in the agent's messages."""
    paced: YamlBool = False
    """The agent must stream at real-time pace (20 ms of audio every 20 ms): audio faster than that fails the
    turn. Off, a reply sent in one burst plays on the playback clock, as the realtime target's does."""

    @model_validator(mode="after")
    def _json_frames(self) -> AudioSpec:
        if self.frames == "json":
            if self.send is None or "{{message.audio}}" not in json.dumps(self.send):
                raise ValueError("audio.frames: json needs `send`, a message with \"{{message.audio}}\" where "
                                 "the frame goes")
            if not self.receive:
                raise ValueError("audio.frames: json needs `receive`, the JSONPath of the agent's audio")
            _path(self.receive)
        return self


class MessageMatch(Strict):
    when: dict[str, object]
    """JSONPath: the value it must find (all of them)."""
    text: str | None = None
    """JSONPath of the text the message carries (a transcript)."""

    @field_validator("when")
    @classmethod
    def _paths(cls, when: dict[str, object]) -> dict[str, object]:
        for path in when:
            _path(path)
        return when


class ToolCallMatch(MessageMatch):
    name: str
    """JSONPath of the tool's name."""
    args: str | None = None
    """JSONPath of its arguments (an object, or JSON text of one)."""
    id: str | None = None
    """JSONPath of the call's id, for `{{message.id}}` in `tool_result`."""

    @field_validator("name", "args", "id")
    @classmethod
    def _valid(cls, path: str | None) -> str | None:
        if path is not None:
            _path(path)
        return path


class MessagesSpec(Strict):
    open: object = None
    """Sent once after connecting: one message template, or a list of them."""
    dtmf: object = None
    """Sent for each keypad digit of a `dtmf` step, with `{{message.digit}}`."""
    close: object = None
    """Sent before tamesu closes the socket: one message template, or a list."""
    tool_result: object = None
    """The answer to a tool call: a template with {{message.id}}, {{message.name}}, {{message.result}} (JSON
    text) and {{message.output}} (the result as a value)."""
    interrupted: MessageMatch | None = None
    """The agent's message saying it stopped speaking because the user barged in."""
    done: MessageMatch | None = None
    """The agent's message that ends its turn at once (instead of waiting `idle`)."""
    transcript: MessageMatch | None = None
    """The agent's message carrying its transcript of the user's speech (`text`)."""
    hangup: MessageMatch | None = None
    """The agent's message that ends the call."""
    tool_calls: ToolCallMatch | None = None
    """The agent's message that is a tool call: JSONPaths to its name, arguments and id."""


class VoiceSessionSpec(SessionSpec):
    open: SessionOpenSpec | None = None
    """A request made before connecting (create the call); its captures are `{{session.NAME}}`."""


class VoiceSpec(TargetSpec):
    url: str
    """ws:// or wss:// URL of the agent's audio websocket; templates allowed (`{{session.NAME}}`)."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers on the websocket handshake; templates allowed."""
    audio: AudioSpec = Field(default_factory=AudioSpec)
    """How audio goes over the socket: its encoding, rate, and binary or JSON frames."""
    messages: MessagesSpec = Field(default_factory=MessagesSpec)
    """The protocol's JSON messages: what tamesu sends (open, dtmf, close, tool results) and how it recognises the
    agent's (done, interrupted, transcript, hangup, tool calls)."""
    session: VoiceSessionSpec = Field(default_factory=VoiceSessionSpec)
    """`open`: a request made before connecting (create the call); its captures are `{{session.NAME}}` in `url` and
    `headers`."""
    tool_results: dict[str, object] = Field(default_factory=dict)
    """tool name: its result, or a list of `{when, result | error}` cases (as the realtime target's)."""
    idle: Duration = 1.0
    """Silence after the agent's speech (on the playback clock) that ends its turn, unless `messages.done` ends
    it first."""
    turn_timeout: Duration = Field(30.0, gt=0)
    """How long the agent may take to start speaking, or to finish a reply that never pauses for `idle`."""
    greeting: YamlBool = True
    """The agent speaks first (its greeting is the first agent turn); false: it waits for the caller, who does."""

    @field_validator("tool_results")
    @classmethod
    def _cases(cls, results: dict[str, object]) -> dict[str, object]:
        return check_tool_results(results)

    @field_validator("url")
    @classmethod
    def _websocket(cls, url: str) -> str:
        return websocket_url(url, "a voice url is ws:// or wss://")

    @model_validator(mode="after")
    def _audio_available(self) -> VoiceSpec:
        require_audio_extra()
        return self


def _first(path: str | None, document: JSONValue) -> object:
    found = _path(path).findall(document) if path else []
    return found[0] if found else None


def _tool_call(match: ToolCallMatch, document: JSONValue) -> dict[str, object]:
    """A tool call message as {name, args, id}: arguments given as JSON text are read."""
    args = _first(match.args, document)
    name = str(_first(match.name, document) or "")
    if isinstance(args, str):
        try:
            args = read_arguments(args, name)
        except json.JSONDecodeError:
            args = {"_unparsed": args}
    if args is None:
        args = {}
    return {"name": name, "args": args if isinstance(args, dict) else
            {"_value": args}, "id": _first(match.id, document)}


def _templates(value: object) -> list[object]:
    return [] if value is None else value if isinstance(value, list) else [value]


def _mentions_trace(value: object) -> bool:
    """A message template that puts the conversation's trace somewhere (`{{trace.traceparent}}`, `{{trace.id}}`)."""
    return "{{trace." in json.dumps(value)


class VoiceWire(Wire):
    def __init__(self, spec: VoiceSpec, session: Session, traceparent: str | None = None) -> None:
        from tamesu.audio.formats import AudioFormat

        self.spec = spec
        self.send_format = self.receive_format = AudioFormat(spec.audio.encoding, spec.audio.sample_rate)
        parsed = TraceContext.parse(traceparent) if traceparent is not None else None
        # the conversation's trace, for the protocol's messages that have a slot for it
        trace = {"traceparent": traceparent, "id": parsed.trace_id if parsed else None} if traceparent else {}
        self.context = session.context.child(trace=trace)
        if traceparent is not None and _mentions_trace(spec.messages.open):
            self.trace_carriers = ("messages.open ({{trace.traceparent}})",)
        self.receive = _path(spec.audio.receive) if spec.audio.receive else None
        self.frame_text: str | None = None
        if spec.audio.frames == "json":
            rendered = self.context.child(message={"audio": _AUDIO}).render_value(spec.audio.send)
            self.frame_text = json.dumps(rendered)
        self.matchers = [(kind, match, {_path(p): v for p, v in match.when.items()},
                          _path(match.text) if match.text else None)
                         for kind in ("interrupted", "done", "transcript", "hangup", "tool_calls")
                         if (match := getattr(spec.messages, kind)) is not None]
        self.json_messages = 0
        self.audio_messages = 0
        self.example: str | None = None
        self._sniffer = EncodingSniffer(self.spec.audio.encoding, "audio.encoding")

    def _render(self, template: object, **names: object) -> str:
        return json.dumps(self.context.child(**names).render_value(template))

    def opening(self, session: Session) -> list[str | bytes]:
        return [self._render(t) for t in _templates(self.spec.messages.open)]

    def closing(self) -> list[str | bytes]:
        return [self._render(t) for t in _templates(self.spec.messages.close)]

    def dtmf(self, digit: str) -> list[str | bytes]:
        if self.spec.messages.dtmf is None:
            raise TurnError("this voice target has no messages.dtmf: it cannot send digits")
        return [self._render(t, message={"digit": digit}) for t in _templates(self.spec.messages.dtmf)]

    def frame(self, data: bytes) -> str | bytes:
        if self.frame_text is None:
            return data
        return self.frame_text.replace(json.dumps(_AUDIO), json.dumps(base64.b64encode(data).decode()))

    def _check_encoding(self, data: bytes) -> None:
        self._sniffer.check(data)

    def read(self, message: str | bytes) -> list[Incoming]:
        if isinstance(message, bytes):
            if self.spec.audio.frames != "binary":
                raise TurnError(f"the agent sent a binary message ({len(message)} bytes) and audio.frames is "
                                "json")
            self.audio_messages += 1
            self._check_encoding(message)
            return [Incoming("audio", message)]
        try:
            document: JSONValue = json.loads(message)
        except ValueError:
            raise TurnError(f"the agent sent a text message that is not JSON: {quoted(message, 200)}") from None
        self.json_messages += 1
        items: list[Incoming] = []
        for kind, match, when, text_path in self.matchers:
            if all(any(v == expected for v in path.findall(document)) for path, expected in when.items()):
                if isinstance(match, ToolCallMatch):
                    items.append(Incoming("tool_call", value=_tool_call(match, document)))
                    continue
                value = None
                if text_path is not None:
                    found = text_path.findall(document)
                    value = " ".join(str(v) for v in found)
                items.append(Incoming(kind, value=value))
        if self.receive is not None:
            found = self.receive.findall(document)
            if found:
                payload = found[0]
                try:
                    audio = base64.b64decode(payload if isinstance(payload, str) else "", validate=True)
                except (binascii.Error, ValueError):
                    raise TurnError(f"audio.receive {self.spec.audio.receive} found {str(payload)[:40]!r}: not "
                                    "base64 audio") from None
                self.audio_messages += 1
                self._check_encoding(audio)
                items.append(Incoming("audio", audio))
            elif not items and self.example is None:
                self.example = one_line(message, 160)
        return items

    def silence_hint(self) -> str:
        if self.receive is not None and self.audio_messages == 0 and self.json_messages:
            return (f"; audio.receive {self.spec.audio.receive} found no audio in the {self.json_messages} JSON "
                    f"message(s) the agent sent (one: {self.example})")
        return ""


@register("targets", "voice")
class VoiceTarget(CapturedSocketAddress, AudioSocketTarget[VoiceSpec]):
    kind = "voice"
    metric_names = socket_metric_names(kind)
    opens_session = True
    dtmf_needs = "messages.dtmf"
    Spec = VoiceSpec
    spec: VoiceSpec
    pace_key = "audio.paced"
    rate_key = "audio.sample_rate"

    def __init__(self, spec: VoiceSpec, name: str) -> None:
        super().__init__(spec, name)
        self.strict_pace = spec.audio.paced
        self.idle_s = spec.idle
        self.can_dtmf = spec.messages.dtmf is not None

    async def greeting(self) -> AgentTurn | None:
        return await super().greeting() if self.spec.greeting else None

    def greets_first(self) -> bool:
        return self.spec.greeting

    async def _open(self, session: Session) -> None:
        if self.spec.session.open is not None:
            await open_session(self.spec.session.open, session, self._what)
        await super()._open(session)

    def _make_wire(self, session: Session) -> Wire:
        return VoiceWire(self.spec, session, self.traceparent)

    def _handle(self, item: Incoming, at: float, heard: Heard, turn: AgentTurn, audio_turn: object) -> bool:
        if item.kind != "tool_call":
            return super()._handle(item, at, heard, turn, audio_turn)
        session = self._require_session()
        call = item.value
        try:
            result, declared = answer(self.spec, call["name"], call["args"], session.context)
        except TemplateError as exc:
            raise TurnError(f"tool {call['name']}: cannot write its result: {exc}", raw=heard.controls) from None
        turn.tool_calls.append(ToolCall(name=call["name"], args=call["args"], result=result))
        heard.controls.append({"tool_call": call})
        session.event("tool_call", name=call["name"], declared=declared)
        template = self.spec.messages.tool_result
        if template is not None:
            names = {"id": call["id"], "name": call["name"], "result": as_output(result), "output": result}
            try:
                reply = json.dumps(session.context.child(message=names).render_value(template))
            except TemplateError as exc:
                raise TurnError(f"messages.tool_result: {exc}", raw=heard.controls) from None
            self._sends.send(reply)
        return True
