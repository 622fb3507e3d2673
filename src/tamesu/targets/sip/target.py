"""The `sip` target: a phone call to (or from) the agent, with tamesu as the SIP user agent.

The spec bridges SIP into a LiveKit room; no LiveKit server can run on tamesu's own machines, so tamesu is the
caller itself (`tamesu.targets.sip`: PJSIP in a worker process) and the call's audio goes through the voice toolkit
like every audio target's: the persona speaks (voice, behaviours, noise) at the call's real-time pace, the
agent's audio is recorded on the playback clock, transcribed, and measured.

Outbound: tamesu dials `to` (a SIP URI, or a number through `trunk`) presenting `from`. Inbound: tamesu listens,
runs the `trigger` (an HTTP request or a command, with `{{session.uri}}`), lets the agent's call ring for
`answer_after` and answers. Either way the agent usually speaks first: with `greeting: true` (the default)
that speech is the first agent turn, so a script can `wait_for: "press 2"`. An agent turn ends after `idle` of
silence following its speech (digits sent after its words are the reply going on), or when the call ends (a reply
still going on at `turn_timeout` fails the turn); the whole call at `max_duration`.
A persona's background noise with `between: true` is on the line between its utterances too (the call
otherwise carries silence there). A `dtmf` step sends RFC 4733 digits; digits the agent sends, its REFER
(transfer) target and who ended the call are recorded for `dtmf_received`, `transferred_to` and `call_ended_by`.

Traces (telemetry.traceparent): an outbound call's INVITE carries the conversation's `traceparent` header (PJSIP adds
it like any of `headers`; a `traceparent` there wins); an inbound call's INVITE is the agent's, so the trigger
carries it instead: its HTTP request's `traceparent` header, its command's `TRACEPARENT` environment variable.
Every turn of the call records that trace id.

Metrics: `call_setup_ms` (dial or trigger to answered), `ring_ms` (ringing to answered), `greeting_ms`
(answered to the agent's first speech), `call_duration_ms` (answered to hang-up), the audio metrics, and per
turn `time_to_first_audio_ms` and, for a reply the persona talked over, `interruption_stop_ms` (`_talk_over`).
Events: `sip_state`, `sip_registration`, `sip_dtmf`, `sip_transfer`, `call_ended` (`by`, `code`, `reason`),
`barge_in`, `audio`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from tamesu.audio import measured
from tamesu.conversation import AgentTurn, Session, TurnAudio, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.plugins import register
from tamesu.targets.audio.heard import take_what_was_heard, wait_until
from tamesu.targets.audio.listen import listen
from tamesu.targets.base import Target
from tamesu.targets.sip._not_connected import credentials_hint, not_reached, unregistered
from tamesu.targets.sip._talk_over import TalkOver
from tamesu.targets.sip._trigger import run_trigger
from tamesu.targets.sip._words import words_of
from tamesu.targets.sip.spec import SipSpec
from tamesu.targets.ws_open import Line, stop_line
from tamesu.telemetry.traceparent import sent_trace_id, with_traceparent

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation
    from tamesu.targets.sip.phone import SipPhone

__all__ = ["SipSpec", "SipTarget"]

BUSY_CODES = {486, 600}
DECLINED_CODES = {603}
"""The callee (or a person at the agent's end) turned the call down: an outcome, like busy, not a failure."""
NO_ANSWER_CODES = {408, 480, 487}
NOT_ACCEPTABLE_HERE = 488
WORDS_OUT_TIMEOUT_S = 3.0
"""How long the caller's queued words may take to leave the SIP worker before their handing over counts."""


@register("targets", "sip")
class SipTarget(Target[SipSpec]):
    kind = "sip"
    metric_names = measured.RECORDED | {"call_setup_ms", "ring_ms", measured.GREETING, "call_duration_ms",
                                        measured.STOP}
    phone_call = hears_dtmf = True
    session_names = frozenset({"uri"})
    audio = dtmf = hears_late = True
    Spec = SipSpec
    spec: SipSpec

    def __init__(self, spec: SipSpec, name: str) -> None:
        super().__init__(spec, name)
        self._phone: SipPhone | None = None
        self._voice: AudioConversation | None = None
        self._seen_chunks = 0
        self._seen_dtmf = 0
        self._seen_transfers = 0
        self._started = 0.0
        self._answered: float | None = None
        self._ended_by: str | None = None
        self._refused: str | None = None
        """Why the call never connected, when it was refused outright (not busy, not unanswered)."""
        self._to = ""
        self._registrar: str | None = None
        """The trunk's registrar, when the call waits for a REGISTER (`register: true`)."""
        self._password: str | None = None
        """The trunk's password as rendered: kept out of the SIP log, though PJSIP never sends it."""
        self._unanswered: str | None = None
        """Why the call never connected, when it was busy or unanswered: an outcome a test may assert."""
        self._reached = False
        """The agent called (inbound) and hung up before the answer."""
        self._metrics: dict[str, float] = {}
        self._after_call: list[AgentTurn] = []  # replies nothing read during the call: transcribed after it
        self._speech_seen = False
        self._line: Line | None = None
        """The persona's noise between its utterances, while it is silent (only with `between` noise)."""
        self._over = TalkOver()

    # ---- the call ----------------------------------------------------------------------------------

    def _require_phone(self) -> SipPhone:
        if self._phone is None:
            raise RuntimeError(f"{self._what}: the phone is not open")
        return self._phone

    def _require_voice(self) -> AudioConversation:
        if self._voice is None:
            raise RuntimeError(f"{self._what}: the call's audio is not open")
        return self._voice

    async def _open(self, session: Session) -> None:
        from tamesu.audio.conversation import AudioConversation
        from tamesu.audio.formats import AudioFormat
        from tamesu.targets.sip._log import log_level
        from tamesu.targets.sip.phone import SipPhone, SipUnavailable

        host, _, port = self.spec.listen.rpartition(":")
        self._phone = SipPhone()
        try:
            local = await self._require_phone().start(host or "127.0.0.1", int(port or 0), self.spec.inbound_number,
                                                      log_level=log_level())
        except (SipUnavailable, ValueError) as exc:
            raise InfraError(f"{self._what}: {exc}") from None
        session.event("transport", binding="sip", local=local, direction=self.spec.direction)
        self._voice = AudioConversation(session, send=AudioFormat("pcm16", 8000), receive=AudioFormat("pcm16", 8000))
        self._started = time.monotonic()
        if self.spec.direction == "outbound":
            await self._dial(session)
        else:
            await self._take_call(session, local)

    async def _dial(self, session: Session) -> None:
        spec = self.spec
        assert spec.to is not None
        try:
            to = spec.dial_uri(session.context.render_text(spec.to))
        except ValueError as exc:
            raise InfraError(f"{self._what}: {exc}") from None
        identity = session.context.render_text(spec.from_) if spec.from_ else None
        auth = None
        if spec.trunk is not None and spec.trunk.username:
            self._password = session.context.render_text(spec.trunk.password or "")
            auth = {"username": session.context.render_text(spec.trunk.username), "password": self._password,
                    "realm": spec.trunk.realm}
        if spec.trunk is not None and spec.trunk.register_:  # without credentials too: a trunk may take it so
            self._registrar = f"sip:{spec.trunk.host}:{spec.trunk.port}" + \
                (";transport=tcp" if spec.trunk.transport == "tcp" else "")
        own = {k: session.context.render_text(v) for k, v in spec.headers.items()}
        headers = with_traceparent(own, session.conversation_trace)
        session.event("sip_dial", to=to)
        if (trace_id := sent_trace_id(own, session.conversation_trace)) is not None:
            session.event("conversation_trace", trace_id=trace_id, sent_in=["INVITE header traceparent"])
        self._to = to
        await self._require_phone().dial(to, identity=identity, headers=headers, auth=auth,
                                         registrar=self._registrar)
        await self._await_answer(session)

    async def _take_call(self, session: Session, local: str) -> None:
        spec = self.spec
        assert spec.trigger is not None
        uri = f"sip:{spec.inbound_number}@{local}"
        await self._require_phone().listen(spec.inbound_number)
        session.values["uri"] = uri
        await run_trigger(self._what, spec, session, uri)
        if not await self._require_phone().wait_incoming(spec.ring_timeout):
            self._end("no_answer", session, reason=f"the agent did not call within {spec.ring_timeout:g}s")
            # the trigger reached it ("never reached" misled): what it was to call is what to check in its logs
            self._unanswered = f"the agent did not call {uri} within {spec.ring_timeout:g}s of the trigger (no_answer)"
            self._reached = True
            return
        await self._require_phone().answer(after_ms=spec.answer_after * 1000)
        await self._await_answer(session)

    def turn_trace_id(self, session: Session) -> str | None:
        # the call is the one carrier: every turn's audio belongs to the conversation's trace
        trace = session.conversation_trace
        own = {k: session.context.render_text(v) for k, v in self.spec.headers.items()} \
            if self.spec.direction == "outbound" else {}
        return sent_trace_id(own, trace)

    async def _await_answer(self, session: Session) -> None:
        state = await self._require_phone().wait_for(["confirmed"], self.spec.ring_timeout)
        call = self._require_phone().call
        if call.not_placed is not None:
            # PJSIP refused to send the INVITE at all: waiting out ring_timeout and blaming the address misled
            raise InfraError(f"{self._what}: the call to {session.redactor.text(self._to)} could not be placed: "
                             f"{call.not_placed}")
        if call.registration is not None:
            session.event("sip_registration", code=call.registration[0], reason=call.registration[1])
        not_registered = call.registration_unanswered or (state is None and call.registration is None)
        if self._registrar is not None and not_registered:
            raise unregistered(self._what, self._registrar, self.spec, self._started,
                               at_ring_timeout=not call.registration_unanswered)
        if (refused := call.registration_refused) is not None:
            self._end("error", session, code=call.registration[0] if call.registration else 0, reason=refused)
            code = call.registration[0] if call.registration else 0
            self._refused = f"the trunk refused the registration: {refused}{credentials_hint(self.spec, code)}; " \
                "the call was not placed"
            return
        never_rang = call.incoming is None and call.first("early") is None
        if state is not None and state.state == "disconnected" and state.unreached and never_rang:
            # the INVITE failed on its way (no such host, a TCP port closed)
            raise not_reached(self._what, session.redactor.text(self._to), self.spec, state, self._started)
        if state is None:
            await self._require_phone().hangup()
            await self._require_phone().wait_for(["disconnected"], 3)
            if never_rang:
                # dialled, and it never even rang: nothing at that address took the INVITE (a closed port, a
                # wrong host), where tamesu was sent, not the agent's outcome
                raise not_reached(self._what, session.redactor.text(self._to), self.spec, None, self._started)
            self._end("no_answer", session, reason=f"no answer within {self.spec.ring_timeout:g}s")
            self._unanswered = f"the call was not answered within {self.spec.ring_timeout:g}s (no_answer)"
            return
        if state.state == "disconnected" and call.incoming is not None and state.by != "caller":
            # inbound: the agent called, then gave up (CANCEL) while tamesu let it ring: it was reached
            self._end("agent", session, code=state.code, reason=state.reason)
            self._unanswered = (f"the agent hung up before tamesu answered, {state.at - call.incoming[0]:.1f}s into "
                                f"answer_after ({self.spec.answer_after:g}s): {state.code} {state.reason} (agent)")
            self._reached = True
            return
        if state.state == "disconnected":
            by = "busy" if state.code in BUSY_CODES else "declined" if state.code in DECLINED_CODES \
                else "no_answer" if state.code in NO_ANSWER_CODES else "error"
            self._end(by, session, code=state.code, reason=state.reason)
            if by == "error":
                # busy, declined and unanswered are outcomes a test may expect; a refusal (a wrong number, credentials
                # the trunk rejects, a server error) means no conversation happened, so the test cannot pass
                self._refused = f"the call was refused: {state.code} {state.reason}".strip()
                if state.code == NOT_ACCEPTABLE_HERE:  # the SDP's offer: tamesu's codecs, which the status leaves out
                    self._refused += " (no audio codec in common: tamesu offers PCMU and PCMA, G.711)"
                self._refused += credentials_hint(self.spec, state.code)
            else:
                what = {"busy": "busy", "declined": "declined"}.get(by, "not answered")
                self._unanswered = f"the call was {what}: {state.code} {state.reason} ({by})"
                self._reached = by == "declined"  # its end turned the call down: not "never reached"
            return
        self._answered = state.at
        dialled = self._started
        self._metrics["call_setup_ms"] = round((state.at - dialled) * 1000, 3)
        ringing = call.first("early")
        rang_at = call.incoming[0] if call.incoming is not None else ringing.at if ringing is not None else None
        if rang_at is not None:
            self._metrics["ring_ms"] = round((state.at - rang_at) * 1000, 3)
        session.event("sip_state", state="confirmed", code=state.code)

    def _end(self, by: str, session: Session, *, code: int = 0, reason: str = "") -> None:
        if self._ended_by is None:
            self._ended_by = by
            session.event("call_ended", by=by, code=code, reason=reason)

    def never_connected(self) -> str | None:
        if self._unanswered is None:
            return None
        reached = "" if self._reached else "; the agent was never reached"
        return f"{self._unanswered}{reached} (`call_ended_by` asserts an expected end)"

    def greets_first(self) -> bool:
        return self.spec.greeting and self._answered is not None

    # ---- turns -------------------------------------------------------------------------------------

    async def greeting(self) -> AgentTurn | None:
        """The agent's first words, before the caller says anything (an IVR's welcome)."""
        if self._refused is not None:
            raise TurnError(self._refused)
        if not self.spec.greeting or self._ended_by is not None:
            return self._ended_turn() if self._ended_by is not None else None
        assert self._session is not None
        turn = AgentTurn(sent_at_ms=self._session.now_ms())
        self._require_voice().listen_only()
        return await self._listen(turn, first=True)

    async def send(self, turn: UserTurn) -> AgentTurn:
        assert self._session is not None
        session = self._session
        if self._ended_by is not None:
            raise TurnError(f"the call has ended ({self._ended_by})")
        said = turn.text
        reply = AgentTurn(sent_at_ms=session.now_ms())
        if turn.dtmf:
            await self._require_phone().dtmf(turn.dtmf)
            session.event("sip_dtmf_sent", digits=turn.dtmf)
        if said:
            barging, self._over.barging = self._over.barging, False
            first = self._first_word_talks_over if barging else self._first_word_closes_the_line
            spoken = await self._require_voice().speak(said, first, pause=not barging)
            await self._words_went_out(spoken)
            await self._over.went_out(self._require_phone(), self.to_ms)
        else:
            self._require_voice().listen_only()
        reply.sent_at_ms = session.now_ms()
        heard = await self._listen(reply, first=False)
        assert heard is not None  # without a limit a turn is always heard (or fails)
        return heard

    async def _words_went_out(self, spoken: TurnAudio) -> None:
        """The caller's words end when their last frame leaves the SIP worker on the call's media clock, not
        when it was handed over: a loaded machine's late frames queue there (seen: 350 ms), and time to first
        audio and the silence after the words start from this end."""
        phone = self._require_phone()
        went = await phone.wait_played(await phone.mark(), WORDS_OUT_TIMEOUT_S)
        if went is not None and spoken.user_to_ms is not None:
            spoken.user_to_ms = max(spoken.user_to_ms, self.to_ms(went))

    async def listen(self, timeout: float) -> AgentTurn | None:
        """The agent's next utterance on the call without the caller saying anything (a `wait_for`)."""
        session = self._require_session()
        if self._ended_by is not None:
            return None
        self._require_voice().listen_only()
        return await self._listen(AgentTurn(sent_at_ms=session.now_ms()), first=False, limit=timeout)

    async def _send_frame(self, frame: bytes) -> None:
        await self._require_phone().frame(frame)

    async def _first_word_talks_over(self, frame: bytes) -> None:
        if self._line is not None:
            await self._close_line()
        await self._over.frame(self._require_voice(), self._require_phone(), self._require_session(), frame)

    async def _first_word_closes_the_line(self, frame: bytes) -> None:
        # the noise between utterances goes on through the persona's pause, until its first frame of speech
        if self._line is not None:
            await self._close_line()
        await self._require_phone().frame(frame)

    async def _listen(self, turn: AgentTurn, *, first: bool, limit: float | None = None) -> AgentTurn | None:
        """The agent's speech until `idle` of silence after it, the call's end, `turn_timeout`, or the call's
        `max_duration`. With `limit`, None when the agent has not started speaking within that many seconds."""
        assert self._session is not None
        session = self._session
        voice, started = self._require_voice(), time.monotonic()
        audio_turn = voice.current
        self._open_line()

        async def over_time() -> bool:
            if self._answered is None or time.monotonic() - self._answered <= self.spec.max_duration:
                return False
            await self._require_phone().hangup()
            self._end("timeout", session, reason=f"the call reached max_duration ({self.spec.max_duration:g}s)")
            await self._require_phone().wait_for(["disconnected"], 3)
            turn.ended = True
            return True

        heard = await listen(self, voice, turn, idle=self.spec.idle, turn_timeout=self.spec.turn_timeout,
                             now_ms=session.now_ms, give_up=over_time, limit=limit, paced=True,
                             talk_over=lambda: self._over.due(voice, session))
        self._over.barging = heard.talked_over
        if not heard.talked_over:
            self._over.close(voice)  # the reply talked over before this one has stopped by now
        if limit is not None and heard.spoke_at is None and not turn.ended:
            return None
        if (first and heard.spoke_at is not None and self._answered is not None
                and "greeting_ms" not in self._metrics):
            self._metrics["greeting_ms"] = self._greeting_ms(heard.spoke_at)
        # a `wait_for` (listening on for `limit`, or a first one for the greeting): transcribed in its time
        until = wait_until(session.greeting_wait_s if first else limit, started, self.spec.turn_timeout,
                           heard.heard_out)
        words = await words_of(voice, session, turn, heard.pcm, self.to_ms(heard.spoke_at or time.monotonic()),
                               until, self.spec.turn_timeout, self._after_call, talked_over=heard.talked_over)
        turn.text = words or ""
        turn.raw = [{"speech_ms": round(len(heard.pcm) / 16, 1), "heard": turn.text}]
        if audio_turn is not None or voice.current is not None:
            record, measures = voice.end_turn(heard=None if words is None else turn.text)
            turn.audio, turn.measures = record, measures
        if heard.talked_over:
            self._over.close(voice)  # one talked over before this one: it stopped before this reply began
            self._over.interrupted = turn
        if self._ended_by is not None:
            turn.ended = True
        return turn

    def _greeting_ms(self, spoke_at: float) -> float:
        """From the answer to the agent's first speech; speech on early media (a 183 with audio, before the
        answer) counts from that 183 instead, and says so: from the answer it came out negative."""
        assert self._answered is not None and self._session is not None
        since = self._answered
        if spoke_at < since:
            early = [s for s in self._require_phone().call.states if s.state == "early" and s.at <= spoke_at]
            since = early[-1].at if early else spoke_at
            self._session.event("early_media", code=early[-1].code if early else 0,
                                spoke_before_answer_ms=round((self._answered - spoke_at) * 1000, 3))
        return round((spoke_at - since) * 1000, 3)

    def _open_line(self) -> None:
        noise = self._require_voice().behaviour.noise
        if self._line is not None or noise is None or not noise.between or self._ended_by is not None:
            return
        from tamesu.targets.sip.phone import SipUnavailable

        stop = asyncio.Event()

        async def run() -> None:
            with contextlib.suppress(SipUnavailable, OSError):  # a worker gone shows in the turn that listens
                await self._require_voice().keep_line_open(self._send_frame, stop)

        self._line = (asyncio.create_task(run()), stop)

    async def _close_line(self) -> None:
        line, self._line = self._line, None
        await stop_line(line)

    def _ended_turn(self) -> AgentTurn:
        assert self._session is not None
        now = self._session.now_ms()
        return AgentTurn(sent_at_ms=now, completed_at_ms=now, ended=True)

    # ---- the call as the listening loop's `Line` (targets.audio.listen) ----

    def fresh_audio(self) -> list[tuple[float, bytes]]:
        audio = self._require_phone().call.audio
        fresh = audio[self._seen_chunks:]
        self._seen_chunks = len(audio)
        return fresh

    def put_back(self, count: int) -> None:
        self._seen_chunks -= count

    def poll(self) -> float | None:
        assert self._session is not None
        call = self._require_phone().call
        digits = call.dtmf[self._seen_dtmf:]
        for at, digit in digits:
            self._session.event("sip_dtmf", digit=digit, at=round(self.to_ms(at), 3))
        self._seen_dtmf = len(call.dtmf)
        for at, target in call.transfers[self._seen_transfers:]:
            self._session.event("sip_transfer", to=target, at=round(self.to_ms(at), 3))
        self._seen_transfers = len(call.transfers)
        return digits[-1][0] if digits else None

    def call_over(self) -> bool:
        phone = self._require_phone()
        if phone.call.ended is None:
            if (why := phone.gone()) is not None:
                # no more audio will come: waiting for silence read as an agent still talking at turn_timeout
                raise InfraError(f"{self._what}: the SIP worker ended in the middle of the call ({why})")
            return False
        self._call_over()
        return True

    def _call_over(self) -> None:
        assert self._session is not None
        ended = self._require_phone().call.ended
        if ended is None or self._ended_by is not None:
            return
        by = "caller" if ended.by == "caller" else "agent" if self._answered is not None else "error"
        self._end(by, self._session, code=ended.code, reason=ended.reason)

    def to_ms(self, monotonic_s: float) -> float:
        assert self._session is not None
        return self._session.now_ms() - (time.monotonic() - monotonic_s) * 1000

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    async def close(self) -> None:
        phone, self._phone = self._phone, None
        if phone is None:
            return
        session = self._session
        await self._close_line()
        try:
            if phone.call.ended is None and phone.local is not None and self._answered is not None \
                    and phone.gone() is None:
                await phone.hangup()
                await phone.wait_for(["disconnected"], 3)
            if session is not None:
                self._phone = phone
                self.poll()
                self._call_over()
                self._phone = None
                ended = phone.call.ended
                if ended is not None and self._answered is not None:
                    # in the session's counters: a run cut short by its timeout keeps them too
                    session.counters["call_duration_ms"] = round((ended.at - self._answered) * 1000, 3)
                if self._voice is not None:
                    with contextlib.suppress(Exception):
                        await self._require_voice().finish()
                    take_what_was_heard(self._after_call)
        finally:
            await phone.close()  # every line of its log has come once it has exited
            if session is not None:
                from tamesu.targets.sip._log import write_log

                write_log(session, phone.log, self._password)
