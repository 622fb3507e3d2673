"""The `realtime` target: an agent speaking the OpenAI Realtime protocol (GA event names) over a websocket.

Opening: connect to `url` (with `?model=` when `model` is set and the URL has none, and `headers`; retried
as `connect` says), wait for `session.created`, send `session.update` with the mode's `output_modalities`,
in audio mode the audio formats (`audio_format`: pcm16 at 24 kHz, G.711 mu-law or A-law at 8 kHz) and
`turn_detection` (null when tamesu commits, `server_vad` otherwise), with `session_update` merged over it,
and wait for `session.updated`. A session whose output format is not the one asked for is refused.

A text turn: `conversation.item.create` (a user message with `input_text`) and `response.create`. An audio
turn: the persona speaks (its `voice`, its `behaviors`) through `tamesu.audio`: 20 ms frames appended at
wall-clock pace, then `input_audio_buffer.commit` + `response.create` (`turn_detection: commit`), or
nothing more and the agent's server VAD decides (`server_vad`). The agent's reply is read until
`response.done`: text deltas, or audio deltas (placed on the playback clock and recorded) with their
transcript, which is the turn's text. The agent's transcript of the user
(`conversation.item.input_audio_transcription.completed`) is kept for `stt_word_error_rate`. A turn that carries
a message history (a stateless JSONL case) first creates one item per earlier message (the user's as
`input_text`, the assistant's as `output_text`), so the response answers the last message in its context.

Function calls (`response.function_call_arguments.done`) are answered from `tool_results` (or as the
test's `fuzz_tools` says for that tool: error, empty, hostile, delay, custom) with a `function_call_output`
item, then `response.create`, and recorded as tool calls (`tool_called`, `tool_sequence`); a call of
`done_tool` is recorded and ends the conversation. More than `max_responses` responses in one turn fail it.

Barge-in (`behaviors.interrupt_probability`): when the persona talks over a reply, the turn ends there; the
next turn's speech starts at once, and tamesu sends `response.cancel` (when it commits; server VAD cancels
by itself) and `conversation.item.truncate` with the audio heard so far. `interruption_stop_ms` is the time
from the user's first word to the last audio the interrupted response still sent.

Failures, each a failed turn with its reason (TurnError): the socket closed, a message that is not JSON, an
`error` event, no `response.done` within `turn_timeout`, audio that does not fit the agreed format. An
unreachable agent, a handshake refused, or no session within `turn_timeout` is an infrastructure error.

Traces (telemetry.traceparent): the websocket handshake carries the conversation's `traceparent` header, and each
`response.create` tamesu sends carries the turn's in `response.metadata.traceparent` (the protocol's own
key-value slot on a response); the turn records the turn's trace id. Under server VAD tamesu sends no
`response.create`: a turn then records the conversation's. A `traceparent` in `headers` wins in both places.

Events: `transport`, `conversation_trace`, `realtime_error`, `barge_in`, `audio`. Metrics: `realtime_events` (received),
`realtime_responses`; audio mode adds the audio metrics (`tamesu.audio.metrics`) and per turn
`time_to_first_audio_ms` and `interruption_stop_ms`. Raw events are kept per turn with audio payloads
replaced by their size.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tamesu.audio import measured
from tamesu.conversation import AgentTurn, Session, TurnAudio, TurnError, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.matching import one_line, quoted
from tamesu.plugins import register
from tamesu.targets.audio.listen import POLL_S
from tamesu.targets.base import Target
from tamesu.targets.realtime.hear_out import hear_out
from tamesu.targets.realtime.parts import NotJson, Reply, history_items, kept, merge, unprompted
from tamesu.targets.realtime.spec import AUDIO_FORMATS, RealtimeSpec, as_output
from tamesu.targets.realtime.tools import answered_call, call_args
from tamesu.targets.ws_open import Closed, Line, hang_up, open_websocket, stop_line
from tamesu.telemetry.traceparent import TraceContext, own_traceparent, sent_trace_id, with_traceparent

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation

__all__ = ["RealtimeSpec", "RealtimeTarget"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""How often an audio turn looks at the playback clock while no event arrives (barge-in timing)."""
# errors that answer tamesu's own cancel of a response that already ended: not the agent's fault
_BENIGN_ERRORS = {"response_cancel_not_active"}


@register("targets", "realtime")
class RealtimeTarget(Target[RealtimeSpec]):
    kind = "realtime"
    metric_names = measured.RECORDED | {measured.STOP, "realtime_events", "realtime_responses"}
    audio = text_mode = True
    Spec = RealtimeSpec
    carries_history = True
    can_dtmf = False

    def __init__(self, spec: RealtimeSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: RealtimeSpec = spec
        self._ws: ClientConnection | None = None
        self._queue: asyncio.Queue[tuple[Any, float]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._voice: AudioConversation | None = None
        self._events = 0
        self._responses = 0
        self._active_response: str | None = None
        self._abandoned: set[str] = set()
        self._barging = False
        self._last_item: str | None = None
        self._interrupted_turn: AgentTurn | None = None
        self._last_reply: tuple[Reply, TurnAudio | None, float] | None = None
        self._finished = False
        self._line: Line | None = None
        """server VAD: the silence tamesu keeps sending between utterances, as an open phone line does."""
        self._own_headers: dict[str, str] = {}
        self._turn_traced = False
        """A `response.create` of this turn carried a `traceparent` (cleared when the next turn is sent)."""
        self._turn_trace: TraceContext | None = None
        """The turn's trace when it did (the suite's own header wins over it)."""

    # -- open and close -------------------------------------------------------------------------------

    def _require_voice(self) -> AudioConversation:
        if self._voice is None:
            raise RuntimeError(f"{self._what}: the audio is not open")
        return self._voice

    def _url(self, session: Session) -> str:
        try:
            url = session.context.render_url(self.spec.url)
        except TemplateError as exc:
            raise InfraError(f"{self._what}: url: {exc}") from exc
        if self.spec.model and "model" not in parse_qs(urlsplit(url).query):
            parts = urlsplit(url)
            query = "&".join(q for q in (parts.query, urlencode({"model": self.spec.model})) if q)
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
        return url

    async def _open(self, session: Session) -> None:
        url = self._url(session)
        try:
            self._own_headers = {k: session.context.render_text(v) for k, v in self.spec.headers.items()}
        except TemplateError as exc:
            raise InfraError(f"{self._what}: headers: {exc}") from exc
        headers = with_traceparent(self._own_headers, session.conversation_trace)
        self._ws = await open_websocket(url, headers, connect_spec=self.spec.connect, session=session,
                                        what=self._what, max_size=MAX_MESSAGE_BYTES, tls=self.spec.tls)
        if (trace_id := sent_trace_id(self._own_headers, session.conversation_trace)) is not None:
            session.event("conversation_trace", trace_id=trace_id, sent_in=["websocket handshake header traceparent"])
        self._reader = asyncio.create_task(self._read())
        session.event("transport", url=session.redactor.text(url), mode=self.spec.mode,
                      audio_format=self.spec.audio_format, turn_detection=self.spec.turn_detection)
        try:
            async with asyncio.timeout(self.spec.turn_timeout):
                created = await self._expect("session.created")
                await self._send({"type": "session.update", "session": self._session_update()})
                updated = await self._expect("session.updated")
        except TimeoutError:
            raise InfraError(f"{self._what}: no session from the agent within {self.spec.turn_timeout:g}s "
                             "(session.created, then session.updated)") from None
        except TurnError as exc:
            raise InfraError(f"{self._what}: opening the session: {exc}") from None
        session.event("realtime_session", created=created.get("session"), updated=updated.get("session"))
        if self.spec.mode == "audio":
            self._check_format(updated)
            from tamesu.audio.conversation import AudioConversation
            from tamesu.audio.formats import AudioFormat

            _type, encoding, rate = AUDIO_FORMATS[self.spec.audio_format]
            fmt = AudioFormat(encoding, rate)  # type: ignore[arg-type]  # the table holds only valid encodings
            self._voice = AudioConversation(session, send=fmt, receive=fmt)

    def _session_update(self) -> dict[str, object]:
        spec = self.spec
        update: dict[str, Any] = {"type": "realtime", "output_modalities": [spec.mode]}
        if spec.mode == "audio":
            fmt: dict[str, Any] = {"type": spec.format_type()}
            if spec.audio_format == "pcm16":
                fmt["rate"] = 24000
            detection = None if spec.turn_detection == "commit" else {"type": "server_vad"}
            update["audio"] = {"input": {"format": fmt, "turn_detection": detection},
                               "output": {"format": dict(fmt)}}
        return merge(update, spec.session_update)

    def _check_format(self, updated: dict[str, Any]) -> None:
        raw_session = updated.get("session")
        session: dict[str, Any] = raw_session if isinstance(raw_session, dict) else {}
        output = ((session.get("audio") or {}).get("output") or {}).get("format") or {}
        asked = self.spec.format_type()
        if isinstance(output, dict) and output.get("type") not in (None, asked):
            raise InfraError(f"{self._what}: the agent's session.updated says its output audio is "
                             f"{output.get('type')}; tamesu asked for {asked} (audio_format: "
                             f"{self.spec.audio_format})")

    async def _close_line(self) -> None:
        line, self._line = self._line, None
        await stop_line(line)

    def _open_line(self) -> None:
        stop = asyncio.Event()

        async def frame(data: bytes) -> None:
            await self._send({"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()})

        async def run() -> None:
            with contextlib.suppress(TurnError):  # a closed socket shows in the turn that reads
                await self._require_voice().keep_line_open(frame, stop)

        self._line = (asyncio.create_task(run()), stop)

    async def close(self) -> None:
        if self._barging and self._last_reply is not None and self._interrupted_turn is not None:
            await hear_out(self, self._last_reply, self._interrupted_turn)  # no words left to talk over it

        async def finish() -> None:
            if self._voice is not None and not self._finished:
                self._finished = True
                self._drain()
                await self._require_voice().finish()

        line, self._line = self._line, None
        await hang_up(line=line, ws=self._ws, reader=self._reader, finish=finish)

    def metrics(self) -> dict[str, float]:
        return {"realtime_events": float(self._events), "realtime_responses": float(self._responses)}

    # -- the wire -------------------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._ws is not None
        session = self._require_session()
        try:
            async for message in self._ws:
                at = session.now_ms()
                text = message.decode("utf-8", errors="replace") if isinstance(message, bytes) else message
                try:
                    event = json.loads(text)
                except ValueError:
                    await self._queue.put((NotJson(one_line(text, 200)), at))
                    continue
                await self._queue.put((event, at))
        except ConnectionClosed:
            pass
        finally:
            ws = self._ws
            await self._queue.put((Closed(ws.close_code, ws.close_reason or ""), session.now_ms()))

    async def _send(self, event: dict[str, Any]) -> None:
        if self._ws is None:
            raise TurnError("the websocket is not open")
        try:
            await self._ws.send(json.dumps(event))
        except ConnectionClosed as exc:
            raise TurnError(f"the agent closed the websocket: {exc}") from None

    async def _next(self, timeout: float | None = None) -> tuple[dict[str, Any], float] | None:
        """The next event, or None after `timeout`; the socket closing or a message that is not JSON fails."""
        try:
            item, at = await (asyncio.wait_for(self._queue.get(), timeout) if timeout else self._queue.get())
        except TimeoutError:
            return None
        if isinstance(item, Closed):
            self._queue.put_nowait((item, at))
            raise TurnError(item.describe())
        if isinstance(item, NotJson):
            raise TurnError(f"the agent sent a message that is not JSON: {quoted(item.text, 200)}")
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise TurnError(f"the agent sent an event without a type: {one_line(json.dumps(item), 200)}")
        self._events += 1
        return item, at

    async def _expect(self, kind: str) -> dict[str, object]:
        while True:
            got = await self._next()
            assert got is not None
            event, _at = got
            if event["type"] == kind:
                return event
            if event["type"] == "error":
                raise TurnError(self._error_text(event))

    def _error_text(self, event: dict[str, Any]) -> str:
        raw_error = event.get("error")
        error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
        code = error.get("code") or error.get("type") or "error"
        return f"the agent answered with an error: {code}: {error.get('message', '')}".rstrip(": ")

    def _drain(self) -> None:
        """Place the agent audio that already arrived (before a barge-in, at the end) at its arrival time, as
        part of the last reply; every other event stays queued, in order."""
        others: list[tuple[Any, float]] = []
        while not self._queue.empty():
            item, at = self._queue.get_nowait()
            if isinstance(item, dict) and item.get("type") == "response.output_audio.delta":
                with contextlib.suppress(TurnError):
                    self._audio(item, at, None, self._require_voice().last)
            else:
                others.append((item, at))
        for entry in others:
            self._queue.put_nowait(entry)

    # -- turns ----------------------------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> AgentTurn:
        """One turn. `turn_timeout` bounds the wait for the agent (from the end of the user's words to the
        last `response.done`), not the user's own speaking time."""
        session = self._require_session()
        self._turn_traced, self._turn_trace = False, None
        said = turn.display()
        reply = Reply()
        audio: TurnAudio | None = None
        for earlier in history_items(turn):  # a stateless test's history: items of the conversation, as text
            await self._send({"type": "conversation.item.create", "item": earlier})
        if self._voice is None:
            sent_at = session.now_ms()
            await self._send({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": said}]}})
            await self._send(self._response_create())
        else:
            audio = await self._speak(said)
            sent_at = audio.user_to_ms or session.now_ms()
            if self.spec.turn_detection == "commit":
                await self._send({"type": "input_audio_buffer.commit"})
                await self._send(self._response_create())
        return await self._reply(session, reply, audio, sent_at)

    async def listen(self, timeout: float) -> AgentTurn | None:
        session = self._require_session()
        return await self._reply(session, Reply(), None, session.now_ms()) \
            if await unprompted(self._queue, timeout, self._voice, POLL_S) else None

    async def _reply(self, session: Session, reply: Reply, audio: TurnAudio | None, sent_at: float) -> AgentTurn:
        limit = self.spec.turn_timeout
        try:
            async with asyncio.timeout(limit) as scope:
                await self._read_reply(session, reply, audio)
        except TimeoutError:
            if not scope.expired():
                raise
            raise TurnError(f"no response.done within turn_timeout ({limit:g}s)", raw=reply.raw, limit_s=limit,
                            started_at_ms=sent_at) from None
        measures: dict[str, float] = {}
        if self._voice is not None:
            audio, measures = self._require_voice().end_turn()
        agent = reply.turn(sent_at, session.now_ms(), audio, measures)
        if reply.interrupted:
            self._interrupted_turn, self._last_reply = agent, (reply, audio, sent_at)
        return agent

    def _response_create(self) -> dict[str, Any]:
        """`response.create`, with the turn's `traceparent` in `response.metadata` (the suite's own wins)."""
        session = self._require_session()
        own = own_traceparent(self._own_headers)
        value = own if own is not None else session.trace.traceparent if session.trace is not None else None
        if value is None:
            return {"type": "response.create"}
        self._turn_traced, self._turn_trace = True, session.trace
        return {"type": "response.create", "response": {"metadata": {"traceparent": value}}}

    def turn_trace_id(self, session: Session) -> str | None:
        """A query: asking twice answers the same (what the turn's `response.create` carried, else the
        conversation's trace, which the handshake carried)."""
        if self._turn_traced:
            return sent_trace_id(self._own_headers, self._turn_trace)
        return sent_trace_id(self._own_headers, session.conversation_trace)

    async def _speak(self, said: str) -> TurnAudio:
        """The persona says the turn; if it is talking over the last reply, the protocol hears so first."""
        voice = self._require_voice()
        barging = self._barging
        self._barging = False
        sent = {"first": True}

        async def frame(data: bytes) -> None:
            if sent["first"] and barging:
                await self._barge_in()
            sent["first"] = False
            await self._send({"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()})

        await self._close_line()
        spoken = await voice.speak(said, frame, pause=not barging)
        if self.spec.turn_detection == "server_vad":
            self._open_line()
        return spoken

    async def _barge_in(self) -> None:
        session = self._require_session()
        self._drain()
        played = self._require_voice().played_ms()
        if self._active_response is not None:
            self._abandoned.add(self._active_response)
            if self.spec.turn_detection == "commit":
                await self._send({"type": "response.cancel"})
        if self._last_item is not None:
            await self._send({"type": "conversation.item.truncate", "item_id": self._last_item,
                              "content_index": 0, "audio_end_ms": played})
        # the caller's first word goes out now, after the protocol's messages: interruption_stop_ms starts
        # here (marked before them, it counted their sending on a loaded machine as the agent's time)
        interrupted = self._require_voice().barge_in()
        session.event("barge_in", item_id=self._last_item, audio_end_ms=played)
        if interrupted is not None and self._interrupted_turn is not None:
            self._interrupted_turn.audio = interrupted

    def _audio(self, event: dict[str, Any], at: float, reply: Reply | None, turn: TurnAudio | None) -> None:
        delta = event.get("delta")
        try:
            data = base64.b64decode(delta if isinstance(delta, str) else "", validate=True)
        except (binascii.Error, ValueError):
            raise TurnError("the agent's response.output_audio.delta is not base64 audio") from None
        from tamesu.audio.conversation import AudioFormatError

        try:
            self._require_voice().agent_audio(data, arrived_ms=at, turn=turn)
        except AudioFormatError as exc:
            raise TurnError(f"the agent's audio does not fit the agreed format: {exc}") from None
        if reply is not None and reply.first_at is None:
            reply.first_at = at

    async def _read_reply(self, session: Session, reply: Reply, audio: TurnAudio | None) -> None:
        """Events until the turn's last response is done, answering tool calls on the way."""
        pending_calls = 0
        responses = 0
        while True:
            got = await self._next(POLL_S if self._voice is not None else None)
            if got is None:
                if self._voice is not None and self._require_voice().barge_in_due():
                    reply.interrupted = True
                    self._barging = True
                    return
                continue
            event, at = got
            kind = event["type"]
            response_id = event.get("response_id") or (event.get("response") or {}).get("id")
            if response_id in self._abandoned:
                # the interrupted reply still arriving: kept in the record, its audio timed, not this turn's
                reply.raw.append(kept(event))
                if kind == "response.output_audio.delta":
                    self._audio(event, at, None, None)
                elif kind == "response.done":
                    self._close_barge_in()
                continue
            reply.raw.append(kept(event))
            if kind == "error":
                raw_error = event.get("error")
                error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
                session.event("realtime_error", code=error.get("code"), message=error.get("message"))
                if error.get("code") in _BENIGN_ERRORS:
                    continue
                raise TurnError(self._error_text(event), raw=reply.raw)
            if kind == "response.created":
                self._active_response = response_id
                responses += 1
                self._responses += 1
                if responses > self.spec.max_responses:
                    raise TurnError(f"the agent started more than {self.spec.max_responses} responses in one "
                                    "turn (max_responses)", raw=reply.raw)
            elif kind in ("response.output_text.delta", "response.output_audio_transcript.delta"):
                reply.text += str(event.get("delta", ""))
                if reply.first_at is None:
                    reply.first_at = at
            elif kind == "response.output_audio.delta":
                if self._voice is None:
                    raise TurnError("the agent sent audio in a text session (output_modalities: [text])",
                                    raw=reply.raw)
                self._audio(event, at, reply, self._require_voice().current)
            elif kind == "response.output_item.added":
                item = event.get("item") or {}
                if item.get("type") == "message":
                    self._last_item = item.get("id")
            elif kind == "conversation.item.input_audio_transcription.completed" and audio is not None:
                audio.agent_heard_user = str(event.get("transcript", ""))
            elif kind == "response.function_call_arguments.done":
                pending_calls += 1
                if await self._call(session, event, reply):
                    reply.ended = True
            elif kind == "response.done":
                self._active_response = None
                self._close_barge_in()
                reply.response = event.get("response")
                reply.done_at = at
                if pending_calls and not reply.ended:
                    pending_calls = 0
                    await self._send(self._response_create())
                    continue
                return
            if self._voice is not None and self._require_voice().barge_in_due():
                reply.interrupted = True
                self._barging = True
                return

    def _close_barge_in(self) -> None:
        if self._voice is None:
            return
        stop = self._require_voice().close_barge_in()
        if stop is not None and self._interrupted_turn is not None:
            self._interrupted_turn.measures["interruption_stop_ms"] = stop
            self._interrupted_turn = None

    async def _call(self, session: Session, event: dict[str, Any], reply: Reply) -> bool:
        """Answer one function call from tool_results and record it; True when it was the done_tool."""
        name = str(event.get("name", ""))
        call = await answered_call(self.spec, session, name, call_args(event, name), reply)
        result = call.result
        await self._send({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": event.get("call_id", ""), "output": as_output(result)}})
        return self.spec.done_tool is not None and name == self.spec.done_tool
