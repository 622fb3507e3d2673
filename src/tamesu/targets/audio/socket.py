"""A phone-like call over one websocket that carries audio both ways: the core of the `twilio` and `voice`
targets. The target's `Wire` owns the protocol (what tamesu sends to open, how a frame, a digit and the hang-up
travel, what each message it receives means); this module owns the call:

- open: connect (retried as `connect` says), send the wire's opening messages, start reading;
- the agent speaks first (`greeting()`; `greeting: false`, the caller does); a turn is the persona's speech (its
  voice and behaviours) or digits, then the agent's reply (ending with its sound, on the playback clock) once
  `idle` of silence followed, a `done` or a hang-up; between utterances the line carries silence at real-time
  pace, as a phone line does, so an agent that finds the end of speech itself (VAD) hears the pause;
- barge-in: the persona talks over a reply, the turn ends there, the next one is spoken at once; the agent's
  `clear` (or `interrupted`) is recorded; `interruption_stop_ms` runs from the user's first word to the clear, or
  to the reply's last audio. The talked-over reply's text is the agent's words for it when its protocol gives
  them, else what the caller heard, transcribed after the call (before the user speaks would hold it back).

Each failure is a failed turn with its reason: the socket closed mid-turn, nothing said within `turn_timeout`,
audio not in the agreed format, faster than real time past `turn_timeout`, or over 3 times its length in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tamesu.audio import measured
from tamesu.conversation import AgentTurn, Session, TurnError, UserTurn, given_since
from tamesu.errors import InfraError, TemplateError
from tamesu.targets.audio._call_trace import CallTrace
from tamesu.targets.audio._chunk import take_chunk
from tamesu.targets.audio._sends import Sends
from tamesu.targets.audio.burst import FLOOD_FACTOR, STRICT_FLOOD_FACTOR, flood, pace_problem, past_the_cap
from tamesu.targets.audio.hear_out import hear_out
from tamesu.targets.audio.heard import (
    Heard,
    hung_up,
    late_look,
    listening_notes,
    not_by,
    read_after_call,
    take_what_was_heard,
    transcribed,
    unheard,
)
from tamesu.targets.audio.listen import POLL_S, ended_late
from tamesu.targets.audio.wire import Incoming, Wire
from tamesu.targets.base import SpecT, Target
from tamesu.targets.ws_open import Line, hang_up, open_websocket, stop_line

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
COUNTS = ("messages", "clears", "marks", "dtmf_sent")
"""What every audio socket counts, recorded as `<type>_<count>` (`metrics()`)."""


def socket_metric_names(kind: str, counts: tuple[str, ...] = ()) -> frozenset[str]:
    """What an audio socket target of type `kind` records (its `Target.metric_names`): its counts (`COUNTS` and its
    own), the greeting's wait, a barge-in's stop, and every audio call's."""
    return measured.RECORDED | {measured.GREETING, measured.STOP} | {f"{kind}_{n}" for n in (*COUNTS, *counts)}


class AudioSocketTarget(CallTrace, Target[SpecT]):
    """A target whose agent is reached over one audio websocket (see the module's docstring)."""

    audio = dtmf = True  # a phone-like call: it speaks, and its wire says how a digit travels
    hears_late = True
    can_dtmf = True
    idle_s: float = 1.0
    strict_pace = False
    """The agent must stream at real-time pace: audio faster than that fails the turn (`pace_key` says how a
    suite asks for it). Off, a reply sent in a burst plays on the playback clock, as the realtime target's."""
    pace_key = ""
    rate_key = ""
    """The key of the agreed sample rate, for a target whose rate the suite sets: a steady stream at a multiple
    of real time (not a burst) then fails the turn naming it."""

    def __init__(self, spec: SpecT, name: str) -> None:
        super().__init__(spec, name)
        self._ws: ClientConnection | None = None
        self._wire: Wire | None = None
        self._voice: AudioConversation | None = None
        self._queue: asyncio.Queue[tuple[Any, float]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._line: Line | None = None
        self._closed: str | None = None
        self._barging = False
        self._interrupted: AgentTurn | None = None
        self._heard_after_stop: list[AgentTurn] = []
        """Replies with no words of the agent's talked over, or that nothing read during the call: their text is what
        the caller heard, transcribed when the call ends."""
        self._finished = False
        self._send_lock = asyncio.Lock()
        self._sends = Sends(self._send)
        self._counts = dict.fromkeys(COUNTS, 0)
        self._opened_at: float | None = None
        self._metrics: dict[str, float] = {}

    def _require_voice(self) -> AudioConversation:
        if self._voice is None:
            raise RuntimeError(f"{self._what}: the audio is not open")
        return self._voice

    @abstractmethod
    def _make_wire(self, session: Session) -> Wire: ...

    @abstractmethod
    def _url(self, session: Session) -> str: ...

    def _headers(self, session: Session) -> dict[str, str]:
        return {}

    # -- open and close -------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        from tamesu.audio.conversation import AudioConversation

        try:
            url = self._url(session)
            headers = self._handshake_headers(session, self._headers(session))
        except TemplateError as exc:
            raise InfraError(f"{self._what}: {exc}") from exc
        self._ws = await open_websocket(url, headers, connect_spec=self.spec.connect, session=session,
                                        what=self._what, max_size=MAX_MESSAGE_BYTES, tls=self.spec.tls)
        self._wire = wire = self._make_wire(session)
        self._traced(session, wire)
        self._voice = AudioConversation(session, send=wire.send_format, receive=wire.receive_format)
        session.event("transport", url=session.redactor.text(url), send=str(wire.send_format),
                      receive=str(wire.receive_format))
        self._reader = asyncio.create_task(self._read())
        for message in wire.opening(session):
            await self._send(message)
        self._opened_at = time.monotonic()
        self._open_line()

    async def close(self) -> None:
        if self._barging and self._closed is None and self._interrupted is not None:  # no words left to talk over it
            await hear_out(self._queue, self._read_message, self._require_voice(), self._interrupted,
                           idle_s=self.idle_s, limit_s=self.spec.turn_timeout, words=self._words_heard_out)
        self._sends.cancel_marks()
        wire = self._wire

        async def goodbye(ws: ClientConnection) -> None:
            if wire is not None and self._closed is None:
                for message in wire.closing():
                    await ws.send(message)

        async def finish() -> None:
            if self._voice is not None and not self._finished:
                self._finished = True
                with contextlib.suppress(Exception):
                    await self._require_voice().finish()
                take_what_was_heard(self._heard_after_stop)

        line, self._line = self._line, None
        await hang_up(line=line, ws=self._ws, reader=self._reader, goodbye=goodbye, finish=finish)

    def metrics(self) -> dict[str, float]:
        return {**{f"{self.kind}_{k}": float(v) for k, v in self._counts.items()}, **self._metrics}

    # -- the socket -----------------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._ws is not None
        session = self._require_session()
        ws = self._ws
        try:
            with contextlib.suppress(ConnectionClosed):
                async for message in ws:
                    await self._queue.put((message, session.now_ms()))
        finally:
            code = "no close code" if ws.close_code is None else f"code {ws.close_code}"
            reason = f", {ws.close_reason}" if ws.close_reason else ""
            await self._queue.put((None, session.now_ms()))
            self._closed = f"the agent closed the websocket ({code}{reason})"

    async def _send(self, message: str | bytes) -> None:
        if self._ws is None:
            raise TurnError("the websocket is not open")
        try:
            async with self._send_lock:
                await self._ws.send(message)
        except ConnectionClosed as exc:  # its words as a close read elsewhere, not the library's "received 1000 (OK)"
            code = f"code {exc.rcvd.code}{', ' + exc.rcvd.reason if exc.rcvd.reason else ''}" if exc.rcvd else "no code"
            raise TurnError(f"the agent closed the websocket ({code}) while the user was speaking") from None

    def _open_line(self) -> None:
        stop = asyncio.Event()
        assert self._wire is not None
        wire = self._wire

        async def frame(data: bytes) -> None:
            await self._send(wire.frame(data))

        async def run() -> None:
            with contextlib.suppress(TurnError):  # a closed socket shows in the turn that reads
                await self._require_voice().keep_line_open(frame, stop)

        self._line = (asyncio.create_task(run()), stop)

    async def _close_line(self) -> None:
        line, self._line = self._line, None
        await stop_line(line)

    # -- turns ----------------------------------------------------------------------------------------

    async def greeting(self) -> AgentTurn | None:
        return await self._unprompted(greeting=True)

    async def listen(self, timeout: float) -> AgentTurn | None:
        return None if self._closed is not None else await self._unprompted(wait_s=timeout)

    async def _unprompted(self, *, greeting: bool = False, wait_s: float | None = None) -> AgentTurn | None:
        """What the agent says without the user saying anything: its greeting, or more (a `wait_for`)."""
        self._require_voice().listen_only()
        turn = AgentTurn(sent_at_ms=self._require_session().now_ms())
        return await self._listen(turn, greeting=greeting, wait_s=wait_s)

    async def send(self, turn: UserTurn) -> AgentTurn:
        session = self._require_session()
        if self._closed is not None:
            raise TurnError(f"the call has ended: {self._closed}")
        assert self._wire is not None
        said = turn.text if turn.text and turn.text != turn.dtmf else ""
        if turn.dtmf:
            for digit in turn.dtmf:
                for message in self._wire.dtmf(digit):
                    await self._send(message)
            self._counts["dtmf_sent"] += len(turn.dtmf)
            session.event("dtmf_sent", digits=turn.dtmf)
        if said:
            await self._speak(said)
        else:
            self._require_voice().listen_only()
        reply = AgentTurn(sent_at_ms=session.now_ms())
        return await self._listen(reply, greeting=False) or reply  # never None without wait_s

    async def _speak(self, said: str) -> None:
        assert self._wire is not None
        wire = self._wire
        barging = self._barging
        self._barging = False
        first = {"sent": False}

        async def frame(data: bytes) -> None:
            if not first["sent"] and barging:
                self._barge_in()
            first["sent"] = True
            await self._send(wire.frame(data))

        await self._close_line()
        try:
            await self._require_voice().speak(said, frame, pause=not barging)
        finally:
            self._open_line()

    def _barge_in(self) -> None:
        session = self._require_session()
        self._place_queued_audio()
        interrupted = self._require_voice().barge_in()
        session.event("barge_in", at=round(session.now_ms(), 3))
        if interrupted is not None and self._interrupted is not None:
            self._interrupted.audio = interrupted

    def _place_queued_audio(self) -> None:
        """The agent audio that arrived while the user spoke belongs to the reply being talked over."""
        others: list[tuple[Any, float]] = []
        while not self._queue.empty():
            message, at = self._queue.get_nowait()
            if message is None:
                others.append((message, at))
                continue
            try:
                items = self._wire.read(message) if self._wire is not None else []
            except TurnError:
                items = []
            rest = [item for item in items if item.kind != "audio"]
            for item in items:
                if item.kind == "audio":
                    with contextlib.suppress(Exception):
                        self._require_voice().agent_audio(item.audio, arrived_ms=at, turn=self._require_voice().last)
            if rest:
                others.append((rest, at))
        for entry in others:
            self._queue.put_nowait(entry)

    async def _listen(self, turn: AgentTurn, *, greeting: bool, wait_s: float | None = None) -> AgentTurn | None:
        """The reply: until `idle` of quiet after speech, `done`, a close or `turn_timeout`; None: silent to wait_s."""
        session = self._require_session()
        heard = Heard()
        started = time.monotonic()
        limit = self.spec.turn_timeout
        timed_from = None if wait_s is not None else started  # listening on: turn_timeout from its first sound
        # a late look: what arrived by the wait's end, which passed while the utterance before was transcribed
        by_ms = session.now_ms() + wait_s * 1000 if wait_s is not None and late_look(wait_s) else None
        audio_turn = self._require_voice().current
        idle_ms = self.idle_s * 1000
        ended = interrupted = fell_quiet = False
        while True:
            came: float | None = None
            try:
                message, at = await asyncio.wait_for(self._queue.get(), POLL_S)
            except TimeoutError:
                pass  # nothing came: the idle, barge-in and turn_timeout checks below still run
            else:
                came = at
                if heard.quiet_from is not None and at - heard.quiet_from >= idle_ms and not self._still_speaking():
                    # the reply had ended (`idle` of quiet) before this came: a listener behind the line (a late look,
                    # read after the utterance before was transcribed) leaves it to the next listening
                    self._read_first((message, at))
                    fell_quiet = True
                    break
                if message is None:
                    self._queue.put_nowait((None, at))
                    if heard.spoke_at is None:
                        raise TurnError(f"{self._closed or 'the agent closed the websocket'} before it said "
                                        "anything in this turn", raw=heard.controls)
                    hung_up(session, heard, self._require_voice().playback.cursor_ms, self._closed)
                    ended = True
                    break
                items = message if isinstance(message, list) else self._read_message(message)
                stop_kind = None
                for item in items:
                    self._handle(item, at, heard, turn, audio_turn)
                    if item.kind in ("done", "hangup"):
                        stop_kind = item.kind
                if too_much := past_the_cap(heard, limit, lambda: self._flood(heard)):
                    raise TurnError(too_much, raw=heard.controls)
                if stop_kind is not None:
                    if not_by(by_ms, heard.spoke_at, came, more=True):
                        return None
                    ended = stop_kind == "hangup"
                    break
            if not_by(by_ms, heard.spoke_at, came, more=not self._queue.empty()):
                return None
            now_ms = session.now_ms()
            # quiet only once every message that came has been read: audio queued while the user spoke is
            # placed at its arrival, so the first stale chunk alone would look like a reply long finished
            if (heard.quiet_from is not None and now_ms - heard.quiet_from >= idle_ms and self._queue.empty()
                    and not self._still_speaking()):
                fell_quiet = True
                break
            # only once what came before has been read: a reader ahead of a starved listener holds messages
            # (the reply's own sentences, the agent's stop) that belong before the barge-in, not after it
            if heard.spoke_at is not None and self._queue.empty() and self._require_voice().barge_in_due():
                interrupted = True
                self._barging = True
                break
            if wait_s is not None and heard.spoke_at is None:
                if by_ms is None and time.monotonic() - started > wait_s:
                    return None
                continue
            timed_from = timed_from or time.monotonic()
            if time.monotonic() - timed_from > limit:
                given = given_since(limit, timed_from, now_ms)
                if heard.spoke_at is None:
                    hint = unheard(heard, self._wire, self._voice, self._flood(heard), self.idle_s)
                    raise TurnError(f"the agent said nothing within turn_timeout ({limit:g}s){hint}",
                                    raw=heard.controls, **given)
                flood = self._flood(heard)  # else a reply still going on in real time: a talker who never stops
                if flood or heard.quiet_from is None or now_ms - heard.quiet_from < idle_ms / 2:
                    raise TurnError(f"the agent's audio never stopped within turn_timeout ({limit:g}s): {flood}"
                                    if flood else ended_late(limit, self.idle_s), raw=heard.controls, **given)
                break
        turn.completed_at_ms = heard.quiet_from if fell_quiet and heard.quiet_from else session.now_ms()
        for name, said in listening_notes(heard, self.idle_s, self._require_voice().receive_format, self.rate_key):
            session.event(name, **said)
        if not interrupted:
            self._close_barge_in()  # no clear came: the stop is the last audio of the reply talked over
        if flood := self._flood(heard):
            session.event("audio_flood", detail=flood)
            heard.controls.append({"audio_flood": flood})
        # without a flood too: a stream at another rate read by a starved tamesu can span more than its length
        if problem := self._pace_problem(heard, flood):
            raise TurnError(problem, raw=heard.controls)
        own, words = self._own_words(heard), None
        # a reply put aside (read_after_call) is what the caller heard of it, up to a barge-in, once the call is over;
        # a `wait_for`'s listening is transcribed within its time (wait_until; what it did not hear is said)
        if own or not read_after_call(session, turn, self._heard_after_stop, talked_over=interrupted):
            # heard out when its speech ended and `idle` told so, on the playback clock: a listener behind (a late
            # look reads what came while the utterance before was transcribed) fell quiet later than the agent did
            heard_out = (time.monotonic() - (session.now_ms() - heard.quiet_from - idle_ms) / 1000
                         if fell_quiet and heard.quiet_from is not None else None)
            words = own or await transcribed(self._require_voice(), heard, started, wait_s, greeting, limit,
                                             heard_out)
        turn.text = words or ""
        turn.raw = [*heard.controls, {"agent_audio_ms": round(heard.audio_ms, 1), "heard": turn.text}]
        record, measures = self._require_voice().end_turn(heard=None if own or words is None else turn.text)
        turn.audio, turn.measures = record, measures
        turn.ended = ended
        if greeting and heard.spoke_at is not None and "greeting_ms" not in self._metrics:
            self._metrics["greeting_ms"] = round(heard.spoke_at - turn.sent_at_ms, 3)
        if interrupted:
            self._close_barge_in()  # the reply talked over before this one: its stop is known by now
            self._interrupted = turn
        return turn

    def _read_first(self, entry: tuple[Any, float]) -> None:
        """`entry`, taken from the queue, is read again before what came after it."""
        after = [entry]
        while not self._queue.empty():
            after.append(self._queue.get_nowait())
        for each in after:
            self._queue.put_nowait(each)

    def _still_speaking(self) -> bool:
        """Whether the agent said it is still speaking (a pause is then no end of its turn); protocols override."""
        return False

    def _read_message(self, message: str | bytes) -> list[Incoming]:
        assert self._wire is not None
        self._counts["messages"] += 1
        return self._wire.read(message)

    def _handle(self, item: Incoming, at: float, heard: Heard, turn: AgentTurn, audio_turn: Any) -> bool:
        session = self._require_session()
        if item.kind == "audio":
            if not item.audio:
                return False
            take_chunk(self._require_voice(), item.audio, at, heard, turn, audio_turn)
            return True
        if item.kind in ("clear", "interrupted"):
            self._counts["clears"] += 1
            heard.controls.append({item.kind: round(at, 3)})
            session.event("agent_clear", kind=item.kind, at=round(at, 3))
            self._require_voice().playback.flush(at)
            self._require_voice().recorder.cut_agent(at)
            self._sends.flush_marks()  # Twilio returns the marks still pending at once on a clear
            pending = self._require_voice()._pending_barge_in
            if pending is not None and pending.interrupted_at_ms is not None:
                pending.agent_stopped_at_ms = at
                self._close_barge_in()
            return True
        if item.kind == "mark":
            self._counts["marks"] += 1
            self._echo_mark(str(item.value), at)
            return True
        if item.kind == "transcript" and audio_turn is not None:
            audio_turn.agent_heard_user = str(item.value)
            heard.controls.append({"transcript": item.value})
            return True
        if item.kind in ("done", "hangup", "text"):
            heard.controls.append({item.kind: item.value})
            return True
        return False

    def _echo_mark(self, name: str, at: float) -> None:
        """Twilio echoes a mark once the audio sent before it has played."""
        assert self._wire is not None
        echo = self._wire.mark_echo(name)
        if echo is None:
            return
        delay = max(0.0, self._require_voice().playback.cursor_ms - self._require_session().now_ms()) / 1000
        self._sends.echo_after(echo, delay)

    def _close_barge_in(self) -> None:
        stop = self._require_voice().close_barge_in()
        if stop is not None and self._interrupted is not None:
            self._interrupted.measures["interruption_stop_ms"] = stop
            self._interrupted = None

    def _flood(self, heard: Heard) -> str | None:
        return flood(heard, STRICT_FLOOD_FACTOR if self.strict_pace or self.rate_key else FLOOD_FACTOR)

    def _pace_problem(self, heard: Heard, flood: str | None) -> str | None:
        return pace_problem(heard, flood, self._require_voice().receive_format, self.strict_pace and self.pace_key,
                            self.rate_key)

    def _own_words(self, heard: Heard) -> str:
        """What the agent says it said, where its protocol says so (then the turn's text); else empty."""
        return ""

    def _words_heard_out(self, reply: AgentTurn, items: list[Incoming]) -> str | None:
        return None  # no words of its own: the reply heard out is transcribed when the call ends
