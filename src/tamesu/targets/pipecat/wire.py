"""The wire of a Pipecat bot's websocket transport with its protobuf serializer: binary `Frame` messages
(tamesu.pipecat.v1, tamesu's own description of the format) carrying pcm16 audio both ways, the bot's
interruption frames, and RTVI messages as JSON in `message.data` (`label: "rtvi-ai"`).

tamesu is the RTVI client: it sends `client-ready` and waits for `bot-ready`, sends the user's text as
`send-text`, keypad digits as `dtmf`, and answers the bot's client-side function calls (`llm-function-call`)
with `llm-function-call-result`. What the bot sends is read into `Incoming` items for the audio socket's call
(audio, interrupted, transcript) and the pipecat target's own kinds (ready, said, llm_text, llm, speaking,
tool_call, bot_interrupted, error).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from tamesu._proto.pipecat.v1 import frames_pb2
from tamesu.conversation import TurnError
from tamesu.matching import quoted
from tamesu.targets.audio.wire import Incoming, Wire

RTVI_LABEL = "rtvi-ai"
RTVI_VERSION = "2.2.0"
"""The RTVI protocol version tamesu speaks as a client (pipecat-ai 1.14's)."""
_QUIET = {"bot-audio-level", "user-audio-level", "metrics"}
"""RTVI messages that are not kept in a turn's record (they come several times a second)."""
# what an RTVI message means for the turn; the rest are kept in the record and change nothing
_KINDS = {"bot-llm-started": ("llm", True), "bot-llm-stopped": ("llm", False),
          "bot-started-speaking": ("speaking", True), "bot-stopped-speaking": ("speaking", False),
          "bot-tts-started": ("tts", True), "bot-tts-stopped": ("tts", False)}


def rtvi(kind: str, data: object = None) -> bytes:
    """An RTVI client message in a protobuf frame."""
    frame = frames_pb2.Frame()
    frame.message.data = json.dumps({"label": RTVI_LABEL, "type": kind, "id": uuid.uuid4().hex[:12], "data": data})
    return frame.SerializeToString()


def peek(message: object) -> str:
    """What a message is, without reading it into a turn: `audio`, `interruption`, an RTVI type, or `other`."""
    if not isinstance(message, bytes):
        return "other"
    try:
        frame = frames_pb2.Frame.FromString(message)
    except DecodeError:
        return "other"
    which = frame.WhichOneof("frame")
    if which == "message":
        try:
            document = json.loads(frame.message.data)
        except ValueError:
            return "other"
        return str(document.get("type", "other")) if isinstance(document, dict) else "other"
    return which or "other"


class PipecatWire(Wire):
    def __init__(self, *, sample_rate: int, audio: bool) -> None:
        self.sample_rate = sample_rate
        self.audio = audio
        if audio:
            from tamesu.audio.formats import AudioFormat

            self.send_format = self.receive_format = AudioFormat("pcm16", sample_rate)
        self.user_input_seen = False
        self.rtvi_messages = 0
        self.audio_frames = 0

    def opening(self, session: Any = None) -> list[str | bytes]:
        return [rtvi("client-ready", {"version": RTVI_VERSION, "about": {"library": "tamesu"}})]

    def frame(self, data: bytes) -> bytes:
        frame = frames_pb2.Frame()
        frame.audio.audio = data
        frame.audio.sample_rate = self.sample_rate
        frame.audio.num_channels = 1
        return frame.SerializeToString()

    def dtmf(self, digit: str) -> list[str | bytes]:
        return [rtvi("dtmf", {"buttons": [digit]})]

    def send_text(self, text: str) -> bytes:
        # text mode asks for no speech: the reply is read from the bot's text messages, not heard
        return rtvi("send-text", {"content": text, "options": {"run_immediately": True,
                                                               "audio_response": self.audio}})

    def tool_result(self, call: dict[str, Any], result: Any) -> bytes:
        return rtvi("llm-function-call-result", {
            "function_name": call.get("function_name", ""), "tool_call_id": call.get("tool_call_id", ""),
            "arguments": call.get("args") or {}, "result": result if isinstance(result, (dict, str)) else
            {"result": result}})

    def read(self, message: str | bytes) -> list[Incoming]:
        if not isinstance(message, bytes):
            raise TurnError(f"the bot sent a text message ({quoted(message, 120)}): a Pipecat protobuf transport sends "
                            "binary frames (is its serializer ProtobufFrameSerializer?)")
        try:
            frame = frames_pb2.Frame.FromString(message)
        except DecodeError:
            raise TurnError(f"the bot sent {len(message)} bytes that are not a Pipecat protobuf frame") from None
        which = frame.WhichOneof("frame")
        if which == "audio":
            return [self._audio(frame.audio)]
        if which == "interruption":
            return [Incoming("interrupted")]
        if which == "transcription":
            return [Incoming("transcript", value=frame.transcription.text)]
        if which == "text":
            return [Incoming("llm_text", value=frame.text.text)]
        if which == "message":
            return self._message(frame.message.data)
        return [Incoming("ignore")]

    def _audio(self, audio: Any) -> Incoming:
        self.audio_frames += 1
        if not self.audio:
            return Incoming("ignore", value="audio")
        if audio.sample_rate and audio.sample_rate != self.sample_rate:
            raise TurnError(f"the bot's audio is at {audio.sample_rate} Hz and sample_rate is {self.sample_rate}: "
                            "set sample_rate to the bot's output rate")
        if audio.num_channels > 1:
            raise TurnError(f"the bot's audio has {audio.num_channels} channels; tamesu hears mono pcm16")
        return Incoming("audio", audio.audio)

    def _message(self, data: str) -> list[Incoming]:
        try:
            document = json.loads(data)
        except ValueError:
            raise TurnError(f"the bot sent a transport message that is not JSON: {quoted(data, 160)}") from None
        if not isinstance(document, dict) or document.get("label") != RTVI_LABEL:
            return [Incoming("message", value=document)]
        self.rtvi_messages += 1
        kind = str(document.get("type", ""))
        given = document.get("data")
        body: dict[str, Any] = given if isinstance(given, dict) else {}
        if kind in _QUIET:
            return [Incoming("ignore")]
        record = Incoming("rtvi", value=_kept(kind, body))
        if kind in _KINDS:
            name, on = _KINDS[kind]
            return [record, Incoming(name, value=on)]
        if kind == "bot-ready":
            return [record, Incoming("ready", value=body)]
        if kind == "bot-output":
            return [record, Incoming("said", value=(body.get("segment_id"), _spoken_text(body),
                                                     str(body.get("text", ""))))]
        if kind == "bot-llm-text":
            return [Incoming("llm_text", value=str(body.get("text", "")))]
        if kind == "llm-function-call":
            return [record, Incoming("tool_call", value=body)]
        if kind == "bot-interrupted":
            return [record, Incoming("bot_interrupted")]
        if kind == "user-input" and body.get("input_type") == "transcription" and body.get("final", True):
            self.user_input_seen = True
            return [record, Incoming("transcript", value=str(body.get("text", "")))]
        if kind == "user-transcription" and body.get("final", True) and not self.user_input_seen:
            return [record, Incoming("transcript", value=str(body.get("text", "")))]
        if kind == "error-response":
            return [record, Incoming("error", value=f"the bot refused a message: {body.get('error', body)}")]
        if kind == "error":
            if body.get("fatal"):
                return [record, Incoming("error", value=f"the bot reported a fatal error: {body.get('error')}")]
            return [record]
        return [record]


def _spoken_text(body: dict[str, Any]) -> str | None:
    """The text of a `bot-output` segment the caller has heard: all of it when it is not spoken or its speech
    completed, the words spoken so far while in progress, None before its speech starts (a segment talked
    over before it played was never said)."""
    text = str(body.get("text", ""))
    if not body.get("will_be_spoken"):
        return text if body.get("spoken") is not False or "will_be_spoken" in body else None
    status = body.get("spoken_status")
    if status == "completed":
        return text
    if status == "in-progress":
        return str((body.get("spoken_progress") or {}).get("accumulated_text") or "") or None
    return None


def _kept(kind: str, body: Mapping[str, object]) -> dict[str, object]:
    """An RTVI message as the turn's record keeps it: its type and the data that says something."""
    kept: dict[str, object] = {"rtvi": kind}
    for key in ("text", "function_name", "tool_call_id", "args", "arguments", "error", "fatal", "input_type",
                "spoken", "cancelled", "buttons"):
        if key in body:
            kept[key] = body[key]
    return kept
