"""The `pipecat` target: a Pipecat bot's websocket transport with its protobuf frame serializer, RTVI inside.

    type: pipecat
    url: ws://127.0.0.1:8765/ws       # the bot's websocket (FastAPIWebsocketTransport or WebsocketServerTransport)
    mode: text | audio
    greeting: true                     # the bot speaks first (false: the user does)
    sample_rate: 16000                 # audio mode: pcm16 both ways at this rate
    idle: 1s                           # quiet after the bot's reply that ends its turn
    tool_results:                      # answers to the bot's client-side function calls
      get_weather: { summary: "sunny" }
    session:                           # a request before connecting, e.g. a bot runner's start endpoint
      open: { url: "https://runner.example.com/start", capture: { ws: $.ws_url } }   # then url: "{{session.ws}}"

Opening: connect (retried as `connect` says), send RTVI `client-ready` and wait for `bot-ready` (none within
`turn_timeout` is an infrastructure error naming it). The bot's greeting is the first agent turn (`greeting:
false` for a bot that waits for the user).

Text mode: a user turn is RTVI `send-text` (asking for no speech); the reply is the bot's `bot-output`
sentences (its streamed `bot-llm-text` when it sends none), and ends once its model and its speech have
stopped and `idle` has passed with nothing more. Audio mode: the call is the audio socket's (`_audio_socket`):
the persona's speech streams as 20 ms protobuf audio frames at real-time pace, silence between utterances, the
bot's audio on the playback clock, `audio.wav`; a pause in its audio while it says it is speaking (between
`bot-started-speaking` and `bot-stopped-speaking`) does not end its turn, and its speech that comes before its
`bot-started-speaking` counts as the bot speaking too (a loaded bot's message lags its audio by seconds); the
turn's text is what the bot says it said (`bot-output`: the sentences first reported in this turn; one of an
earlier reply reported late is kept in the record as `said_earlier`), or what Whisper hears when it says nothing of
it (for a reply the caller talked over: what was heard up to the barge-in, transcribed once the call ends).

Traces (telemetry.traceparent): the websocket handshake carries the conversation's `traceparent` header (a
`traceparent` in `headers` wins); RTVI messages have no slot for one, so every turn records that trace id.

The bot's own transcript of the user (RTVI `user-input`, or the older `user-transcription`) feeds
`stt_word_error_rate`; its interruption frames stop the reply a barge-in talks over (`interruption_stop_ms`),
and its `bot-interrupted` messages are recorded beside them (`bot_interrupted_ms`, the same barge-in seen by
RTVI). A `dtmf` step is RTVI `dtmf`.

The bot's client-side function calls (`llm-function-call`) are answered from `tool_results` (the realtime
target's form: a result, or `{when, result | error}` cases), or as the test's `fuzz_tools` says for that tool,
with `llm-function-call-result`, and recorded as tool calls (`tool_called`, `tool_sequence`).

Failures fail the turn with the reason: the socket closed, a frame that is not the protobuf wire, audio at
another rate, an RTVI error, nothing said within `turn_timeout`, a reply that never ends (audio faster than
real time is a flood, as on the audio socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tamesu.conversation import AgentTurn, Session, ToolCall, TurnError, UserTurn, given_since
from tamesu.errors import InfraError, TemplateError
from tamesu.fuzzing import fuzz_for, fuzzed_call
from tamesu.plugins import register
from tamesu.targets.audio.heard import Heard
from tamesu.targets.audio.listen import POLL_S
from tamesu.targets.audio.socket import MAX_MESSAGE_BYTES, AudioSocketTarget, socket_metric_names
from tamesu.targets.audio.wire import Incoming, Wire
from tamesu.targets.base import SessionOpenSpec, SessionSpec, TargetSpec
from tamesu.targets.pipecat.wire import PipecatWire, peek
from tamesu.targets.realtime.spec import answer, audio_mode_available, check_tool_results, websocket_url
from tamesu.targets.session_open import CapturedSocketAddress, open_session
from tamesu.targets.ws_open import open_websocket
from tamesu.types import Duration, HttpHeaders, YamlBool, YamlInt

__all__ = ["PipecatSpec", "PipecatTarget"]

_REPLY = {"said", "llm_text", "tool_call", "llm", "speaking", "tts"}
"""What the bot sends as it answers (its interruption of what it was doing, and its hearing of the user, are not
an answer)."""

ANNOUNCE_WAIT_S = 10.0
"""How long after its last unannounced speech the bot's `bot-started-speaking` may still come. Pipecat writes
the audio as it plays it, but the message goes through the bot's RTVI observer first: at load 15-20 it came up
to 5.3 s after the audio it announced. Twice that, so only speech no message will ever cover (a bot that does
not send them) waits this long before its turn can end."""


class PipecatSessionSpec(SessionSpec):
    open: SessionOpenSpec | None = None
    """A request made before connecting (a bot runner's start endpoint); its captures are `{{session.NAME}}`."""


class PipecatSpec(TargetSpec):
    url: str
    """ws:// or wss:// URL of the bot's websocket transport."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Headers on the websocket handshake; templates allowed (`{{session.NAME}}`)."""
    mode: Literal["text", "audio"] = "text"
    """`text`: turns are RTVI text messages; `audio`: the persona speaks pcm16 over the transport and the bot's
    audio is heard."""
    sample_rate: YamlInt = Field(16000, ge=8000, le=48000)
    """audio mode: the rate of the pcm16 audio both ways (the bot's audio_out_sample_rate)."""
    idle: Duration = 1.0
    """How long the bot may stay quiet after its reply before its turn ends."""
    greeting: YamlBool = True
    """The bot speaks first (its greeting is the first agent turn); false: the user does."""
    tool_results: dict[str, Any] = Field(default_factory=dict)
    """tool name: its result, or a list of `{when: {arg: value|regex}, result | error}` tried in order."""
    session: PipecatSessionSpec = Field(default_factory=PipecatSessionSpec)
    """`open`: a request made before connecting (a bot runner's start endpoint); its captures are
    `{{session.NAME}}` in `url` and `headers`."""
    turn_timeout: Duration = Field(30.0, gt=0)

    @field_validator("url")
    @classmethod
    def _websocket(cls, url: str) -> str:
        return websocket_url(url, "a pipecat url is ws:// or wss:// (the bot's websocket transport)")

    @field_validator("tool_results")
    @classmethod
    def _cases(cls, results: dict[str, Any]) -> dict[str, Any]:
        return check_tool_results(results)

    @model_validator(mode="after")
    def _audio_available(self) -> PipecatSpec:
        audio_mode_available(self.mode)
        return self


_COUNTS = ("bot_interrupted", "tool_calls", "rtvi_errors")
"""What a pipecat call counts besides every audio socket's (`pipecat_bot_interrupted`...)."""


@register("targets", "pipecat")
class PipecatTarget(CapturedSocketAddress, AudioSocketTarget[PipecatSpec]):
    kind = "pipecat"
    metric_names = socket_metric_names(kind, _COUNTS) | {"bot_interrupted_ms", "interruption_audio_stop_ms"}
    opens_session = True
    text_mode = True
    Spec = PipecatSpec
    spec: PipecatSpec

    def __init__(self, spec: PipecatSpec, name: str) -> None:
        super().__init__(spec, name)
        self.idle_s = spec.idle
        self._counts.update(dict.fromkeys(_COUNTS, 0))
        self._speaking = False
        """Between the bot's bot-started-speaking and bot-stopped-speaking: a gap in its audio (a loaded bot
        falling behind) is then not the end of its turn."""
        self._unannounced_at: float | None = None
        """When the bot's latest speech came that no bot-started-speaking has covered yet (the call's clock): its
        audio came before its message, and it is speaking all the same."""
        self._barge: tuple[AgentTurn, float] | None = None
        """The reply a barge-in talks over and the user's first word, until RTVI says it was interrupted."""
        self._segment_turns: dict[tuple[object, str], int] = {}
        """Each `bot-output` sentence (its segment id and text) and the turn it was first reported in (`id` of
        its AgentTurn, or the latest turn that announced it before its speech): pipecat's segment ids are unique
        frame ids, a bot of one's own may reuse one."""

    @property
    def _pipecat_wire(self) -> PipecatWire:
        assert isinstance(self._wire, PipecatWire)
        return self._wire

    def _make_wire(self, session: Session) -> Wire:
        return PipecatWire(sample_rate=self.spec.sample_rate, audio=self.spec.mode == "audio")

    # -- open -----------------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        if self.spec.session.open is not None:
            await open_session(self.spec.session.open, session, self._what)
        if self.spec.mode == "audio":
            await super()._open(session)
        else:
            try:
                url, headers = self._url(session), self._handshake_headers(session, self._headers(session))
            except TemplateError as exc:
                raise InfraError(f"{self._what}: {exc}") from exc
            self._ws = await open_websocket(url, headers, connect_spec=self.spec.connect, session=session,
                                            what=self._what, max_size=MAX_MESSAGE_BYTES, tls=self.spec.tls)
            self._wire = self._make_wire(session)
            self._traced(session, self._wire)
            session.event("transport", url=session.redactor.text(url), mode="text")
            self._reader = asyncio.create_task(self._read())
            for message in self._wire.opening(session):
                await self._send(message)
        if not await self._peek_until({"bot-ready"}, self.spec.turn_timeout):
            closed = f": {self._closed}" if self._closed else ""
            raise InfraError(f"{self._what}: no RTVI bot-ready within {self.spec.turn_timeout:g}s after "
                             f"client-ready{closed} (is it a Pipecat bot with the protobuf serializer and RTVI?)")

    async def _peek_until(self, kinds: set[str], timeout: float) -> bool:
        """Whether a message of one of these kinds arrives within `timeout`; every message read on the way
        goes back on the queue, in order, for the turn that reads them."""
        held: list[tuple[Any, float]] = []
        found = False
        deadline = time.monotonic() + timeout
        try:
            while not found and (left := deadline - time.monotonic()) > 0:
                try:
                    message, at = await asyncio.wait_for(self._queue.get(), left)
                except TimeoutError:
                    break
                held.append((message, at))
                if message is None:
                    break
                found = peek(message) in kinds
        finally:
            rest: list[tuple[Any, float]] = []
            while not self._queue.empty():
                rest.append(self._queue.get_nowait())
            for entry in [*held, *rest]:
                self._queue.put_nowait(entry)
        return found

    # -- turns ----------------------------------------------------------------------------------------

    async def greeting(self) -> AgentTurn | None:
        session = self._require_session()
        if not self.spec.greeting:
            return None
        if self.spec.mode == "audio":
            return await super().greeting()
        return await self._listen_text(AgentTurn(sent_at_ms=session.now_ms()))

    async def send(self, turn: UserTurn) -> AgentTurn:
        if self.spec.mode == "audio":
            return await super().send(turn)
        session = self._require_session()
        if self._closed is not None:
            raise TurnError(f"the call has ended: {self._closed}")
        wire = self._pipecat_wire
        if turn.dtmf:
            for digit in turn.dtmf:
                for message in wire.dtmf(digit):
                    await self._send(message)
            self._counts["dtmf_sent"] += len(turn.dtmf)
            session.event("dtmf_sent", digits=turn.dtmf)
        said = turn.text if turn.text and turn.text != turn.dtmf else ""
        reply = AgentTurn(sent_at_ms=session.now_ms())
        if said:
            await self._send(wire.send_text(said))
        heard = await self._listen_text(reply)
        assert heard is not None  # without wait_s a reply is always heard (or fails)
        return heard

    async def listen(self, timeout: float) -> AgentTurn | None:
        if self.spec.mode == "audio":
            return await super().listen(timeout)
        session = self._require_session()
        if self._closed is not None or timeout <= 0:  # a late look: the bot's words need no transcription
            return None
        return await self._listen_text(AgentTurn(sent_at_ms=session.now_ms()), wait_s=timeout)

    async def _listen_text(self, turn: AgentTurn, wait_s: float | None = None) -> AgentTurn | None:
        """A text-mode reply: until the bot's model and speech have stopped and `idle` has passed quietly.
        With `wait_s`, None when the bot has not started its reply within that many seconds."""
        session = self._require_session()
        heard = Heard()
        state = {"llm": False, "speaking": False, "tts": False}
        started = time.monotonic()
        timed_from: float | None = None if wait_s is not None else started
        last_at: float | None = None
        limit = self.spec.turn_timeout
        while True:
            try:
                message, at = await asyncio.wait_for(self._queue.get(), POLL_S)
            except TimeoutError:
                pass
            else:
                if message is None:
                    self._queue.put_nowait((None, at))
                    closed = self._closed or "the bot closed the websocket"
                    if not self._bot_text(heard) and not turn.tool_calls:
                        raise TurnError(f"{closed} before it said anything in this turn", raw=heard.controls)
                    if any(state.values()):
                        running = ", ".join(k for k, v in state.items() if v)
                        raise TurnError(f"{closed} in the middle of its reply (its {running} had not stopped)",
                                        raw=heard.controls)
                    session.event("hangup", by="agent", reason=self._closed)
                    turn.ended = True
                    break
                for item in self._read_message(message):
                    if item.kind in ("llm", "speaking", "tts"):
                        state[item.kind] = bool(item.value)
                    if self._handle(item, at, heard, turn, None) and item.kind in _REPLY:
                        last_at = at
                        if turn.first_token_at_ms is None and item.kind in ("said", "llm_text", "tool_call"):
                            turn.first_token_at_ms = at
            busy = any(state.values())
            if (last_at is not None and not busy and session.now_ms() - last_at >= self.idle_s * 1000
                    and self._queue.empty()):
                break
            if wait_s is not None and last_at is None and not busy:
                # listening on: `wait_s` alone bounds the wait for the reply's start; turn_timeout runs from it
                if time.monotonic() - started > wait_s:
                    return None
                continue
            if timed_from is None:
                timed_from = time.monotonic()
            if time.monotonic() - timed_from > limit:
                given = given_since(limit, timed_from, session.now_ms())
                if last_at is None:
                    raise TurnError(f"the bot said nothing within turn_timeout ({limit:g}s)", raw=heard.controls,
                                    **given)
                raise TurnError(f"the bot's reply did not end within turn_timeout ({limit:g}s): its "
                                f"{', '.join(k for k, v in state.items() if v) or 'messages'} went on",
                                raw=heard.controls, **given)
        turn.completed_at_ms = last_at if last_at is not None else session.now_ms()
        turn.text = self._bot_text(heard)
        if not turn.text and not turn.tool_calls:
            errors = "; ".join(str(c["error"]) for c in heard.controls if c.get("rtvi") == "error" and "error" in c)
            raise TurnError("the bot's reply ended with no text" + (f" (it reported: {errors})" if errors else ""),
                            raw=heard.controls)
        turn.raw = heard.controls
        return turn

    # -- what the bot sends ---------------------------------------------------------------------------

    def _handle(self, item: Incoming, at: float, heard: Heard, turn: AgentTurn, audio_turn: Any) -> bool:
        session = self._require_session()
        kind = item.kind
        if kind == "rtvi":
            heard.controls.append({**item.value, "at": round(at, 3)})
            return True
        if kind == "said":
            segment, spoken, sentence = item.value
            if spoken is None or (segment, sentence) not in self._segment_turns:  # announced: this reply's
                self._segment_turns[(segment, sentence)] = id(turn)
            if segment is not None and self._segment_turns[(segment, sentence)] != id(turn):
                # a sentence of an earlier reply, reported late (a loaded bot, or one talked over that went on):
                # kept in the record, never this reply's words
                heard.controls.append({"said_earlier": [segment, spoken]})
                return True
            heard.controls.append({"said": [segment, spoken]})
            return True
        if kind == "llm_text":
            heard.controls.append({"llm_text": item.value})
            return True
        if kind == "speaking":
            self._speaking = bool(item.value)
            self._unannounced_at = None  # the speech heard so far is the speech this message is about
            return True
        if kind == "audio" and not self._speaking:
            quiet_from = heard.quiet_from
            handled = super()._handle(item, at, heard, turn, audio_turn)
            if heard.quiet_from != quiet_from:  # speech, not silence, and not yet announced
                self._unannounced_at = at
            return handled
        if kind in ("ready", "llm", "tts", "message"):
            return True
        if kind == "tool_call":
            self._answer_call(item.value, turn, heard)
            return True
        if kind == "error":
            self._counts["rtvi_errors"] += 1
            raise TurnError(str(item.value), raw=heard.controls)
        if kind == "transcript":
            if audio_turn is not None:
                heard_user = " ".join(t for t in (audio_turn.agent_heard_user, str(item.value)) if t)
                audio_turn.agent_heard_user = heard_user
            heard.controls.append({"transcript": item.value})
            return True
        if kind == "interrupted":
            if self._voice is None:  # text mode: nothing plays, the bot stopped its model
                self._counts["clears"] += 1
                heard.controls.append({"interrupted": round(at, 3)})
                return True
            self._note_barge()
        if kind == "bot_interrupted":
            self._note_barge()
            self._counts["bot_interrupted"] += 1
            session.event("bot_interrupted", at=round(at, 3))
            if self._barge is not None:
                interrupted, onset = self._barge
                interrupted.measures["bot_interrupted_ms"] = round(at - onset, 3)
                self._barge = None
            return True
        return super()._handle(item, at, heard, turn, audio_turn)

    def _still_speaking(self) -> bool:
        if self._speaking:
            return True
        unannounced = self._unannounced_at
        return unannounced is not None and self._require_session().now_ms() - unannounced < ANNOUNCE_WAIT_S * 1000

    def _note_barge(self) -> None:
        """Keep the reply being talked over and the user's first word, for the RTVI message that follows, and
        where its audio stopped as heard (the last chunk after the user's first word), beside the bot's word."""
        pending = self._voice._pending_barge_in if self._voice is not None else None
        if pending is None or pending.interrupted_at_ms is None or self._interrupted is None:
            return
        self._barge = (self._interrupted, pending.interrupted_at_ms)
        stopped = pending.agent_stopped_at_ms or pending.interrupted_at_ms
        self._interrupted.measures.setdefault("interruption_audio_stop_ms",
                                              round(stopped - pending.interrupted_at_ms, 3))

    def _answer_call(self, call: dict[str, Any], turn: AgentTurn, heard: Heard) -> None:
        """Record the call now and send its answer: from tool_results, or as the test's `fuzz_tools` says for
        that tool (a `delay` answers late, without holding up what the bot sends meanwhile)."""
        session = self._require_session()
        name = str(call.get("function_name", ""))
        given = call.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}

        def declared() -> ToolCall:
            try:
                result, known = answer(self.spec, name, args, session.context)
            except TemplateError as exc:
                raise TurnError(f"tool {name}: cannot write its result: {exc}", raw=heard.controls) from None
            session.event("tool_call", name=name, declared=known)
            return ToolCall(name=name, args=args, result=result)

        self._counts["tool_calls"] += 1
        fuzz = fuzz_for(session, name)
        if fuzz is None:
            recorded = declared()
            turn.tool_calls.append(recorded)
            self._sends.send(self._pipecat_wire.tool_result(call, recorded.result))
            return
        recorded = ToolCall(name=name, args=args)
        turn.tool_calls.append(recorded)  # in order, before its fuzzed answer is ready

        async def real() -> ToolCall:
            return declared()

        async def reply() -> None:
            with contextlib.suppress(TurnError):
                recorded.result = (await fuzzed_call(session, fuzz, name, args, real)).result
                await self._send(self._pipecat_wire.tool_result(call, recorded.result))

        self._sends.spawn(reply())

    def _bot_text(self, heard: Heard) -> str:
        """What the bot says it said: its `bot-output` sentences (each once, once their speech started), else
        (text mode) its model's streamed text."""
        sentences: dict[Any, str] = {}
        for control in heard.controls:
            if "said" in control:
                segment, text = control["said"]
                if text is not None:
                    sentences[segment if segment is not None else len(sentences)] = text
        if sentences or self._voice is not None:  # in audio mode what the model wrote is not what was said
            return " ".join(t.strip() for t in sentences.values() if t.strip())
        return "".join(str(c["llm_text"]) for c in heard.controls if "llm_text" in c).strip()

    def _own_words(self, heard: Heard) -> str:
        return self._bot_text(heard)

    def _words_heard_out(self, reply: AgentTurn, items: list[Incoming]) -> str | None:
        """The last reply's words with the sentences the bot reported spoken while it was heard out; None when it
        reported none (its text is then what was heard, transcribed when the call ends)."""
        heard = Heard(controls=[c for c in reply.raw if isinstance(c, dict) and "said" in c])
        before = len(heard.controls)
        for item in items:
            if item.kind == "said":
                self._handle(item, 0.0, heard, reply, None)
        reply.raw[-1:-1] = heard.controls[before:]  # before the last entry, the turn's `heard`
        if not (text := self._bot_text(heard)):
            return None
        # its words are the bot's now, not a transcript's
        self._heard_after_stop[:] = [turn for turn in self._heard_after_stop if turn is not reply]
        return text
