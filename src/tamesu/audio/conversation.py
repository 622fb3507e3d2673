"""The driver every audio target uses: the simulated user speaks, the agent's audio is heard, both are
recorded, and the run ends with `audio.wav`, the agent's words as tamesu heard them, and the audio metrics.

A target owns its protocol (how a frame, a commit, a cancel travel); this class owns everything else, so the
engine drives every audio target the same way (docs/voice.md):

    voice = AudioConversation(session, send=AudioFormat("pcm16", 24000), receive=AudioFormat("pcm16", 24000))
    spoken = await voice.speak(turn, send_frame)     # silence first, TTS, noise, 20 ms frames at real-time pace
    ... for each audio chunk the agent sends: voice.agent_audio(chunk)   (raises AudioFormatError)
    ... voice.barge_in_due() says when the persona talks over the reply: send what the protocol expects, then
        voice.barge_in() and speak the next turn; voice.agent_stopped() when the agent's audio stops
    turn.audio, turn.measures = voice.end_turn()
    await voice.finish(exchanges)                    # in close(): writes audio.wav, fills metrics
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from tamesu.audio import _ahead, lag, noise, pool, stt, tts
from tamesu.audio import metrics as audio_metrics
from tamesu.audio._hearing import Hearing
from tamesu.audio._kept import Tally
from tamesu.audio.behaviors import Behaviour
from tamesu.audio.clip import Clip
from tamesu.audio.formats import AudioFormat, frames
from tamesu.audio.level import SPEECH_RMS, audible, first_sound, rms
from tamesu.audio.pacing import Pacer, PlaybackClock
from tamesu.audio.recorder import Recorder
from tamesu.audio.voices import Voice
from tamesu.conversation import Session, TurnAudio

WAV_NAME = "audio.wav"
INAUDIBLE = 32
"""A sample no louder than this (-60 dBFS) is inaudible: a synthesised utterance's tail of them is not sent."""


class AudioFormatError(Exception):
    """The agent's audio is not in the format agreed (odd pcm16 length, not base64, another encoding)."""


class AudioConversation:
    def __init__(self, session: Session, *, send: AudioFormat, receive: AudioFormat) -> None:
        self.session = session
        self.send_format = send
        self.receive_format = receive
        persona = session.persona
        self.voice_name = persona.voice if persona is not None else None
        self.behaviour = Behaviour(persona.behaviors if persona is not None else None, session.seed)
        self.recorder = Recorder()
        self.playback = PlaybackClock()
        self.pacer = Pacer()
        self.turns: list[TurnAudio] = []
        self._current: TurnAudio | None = None
        self._interrupt_after: float | None = None
        self._heard_from_ms: float | None = None
        """Where the current reply's first speech plays: the persona's interrupt timer counts from here."""
        self._pending_barge_in: TurnAudio | None = None
        """The reply the user is talking over, until the agent's audio stops."""
        self._earlier: tuple[float, str] | None = None
        """The arrival of the last speech of an earlier reply heard while waiting for the next, and why it was."""
        self.barge_ins = 0
        self._tally = Tally()
        """The lines synthesised for this call, and those it had from the run's kept recordings (`audio` event)."""
        self._ahead = _ahead.Ahead(self.voice_name, self.behaviour.speaking_rate, self._tally)
        """The next line's words and their synthesis, started as this line is said."""
        self._due_ms: float | None = None
        """When the persona's behaviour has it talk over the reply heard now: its first speech and the delay drawn."""
        self._late: tuple[float, bool] | None = None
        """How late the current turn's barge-in started (ms), and whether its words were synthesised ahead."""
        self._ready = False  # the line being said was synthesised ahead, and ready when it came due
        self._in_parts = False  # the line being said started with its first sentence, the rest made meanwhile
        self._hearing = Hearing(session)
        self._listening_only = False
        self.hear_live = False
        """Transcribe each reply as its turn ends (a target sets it when something needs the agent's words
        during the call); else every reply is transcribed once the call is over, in one batch, so no
        transcription competes with the frames of the conversations still talking."""
        self._lag = lag.monitor()
        self._lag_mark = self._lag.watch()
        self._speech_rms = noise.TYPICAL_SPEECH_RMS
        self._unit_noise: np.ndarray | None = None
        """The loudness of the user's last utterance: noise between utterances is set against it."""
        # the speech workers load Whisper and the persona's voice while the call connects and the agent greets
        pool.warm("transcribe", "load_whisper")
        tts.warm(self.voice_name)

    # -- the user speaks ------------------------------------------------------------------------------

    async def speak(self, text: str, send_frame: Callable[[bytes], Awaitable[None]], *,
                    pause: bool = True) -> TurnAudio:
        """Say `text`: wait the persona's silence (unless barging in), synthesise, mix the noise, and send
        20 ms frames at wall-clock pace. Returns the new turn's audio record, its user side filled."""
        text = self.behaviour.words(text)
        turn = TurnAudio(said=text)
        self._current = turn
        self._interrupt_after = self._heard_from_ms = None
        self._listening_only = False
        # a caller waits for the reply to finish playing (a burst plays for as long as it lasts), then pauses;
        # the speech is synthesised meanwhile, so the pause is the persona's and not the TTS's
        silence = self.behaviour.silence_ms() if pause else 0.0
        ready_at = (max(self.session.now_ms(), self.playback.cursor_ms) if pause else self.session.now_ms()) + silence
        clip, voice, ready, rest = await self._synthesised(text, barging=not pause)
        self._ready, self._in_parts = ready, rest is not None
        self._synthesise_ahead()
        turn.voice = voice.name
        seed = self.behaviour.noise_seed() if self.behaviour.noise is not None else 0
        # gain, noise and the wire encoding take tens to hundreds of ms of numpy for a sentence: off the event
        # loop, where they would hold back every other conversation's frames
        recorded, wire = await asyncio.to_thread(self._prepared, clip, seed, rest is None)
        after = asyncio.ensure_future(self._rest_prepared(rest, seed + 1)) if rest is not None else None
        try:
            wait_ms = ready_at - self.session.now_ms()
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            turn.user_from_ms = self.session.now_ms()
            self.recorder.user(recorded, turn.user_from_ms)
            await self.pacer.stream(wire, send_frame)
            if after is not None:  # the rest of the line goes on from the first sentence's last frame
                recorded, rest_wire = await after
                wait_ms = turn.user_from_ms + len(wire) * self.pacer.frame_ms - self.session.now_ms()
                if wait_ms > 0:
                    await asyncio.sleep(wait_ms / 1000)
                self.recorder.user(recorded, self.session.now_ms())
                await self.pacer.stream(rest_wire, send_frame)
        finally:
            if after is not None:
                after.cancel()
        turn.user_to_ms = self.session.now_ms()
        return turn

    async def _rest_prepared(self, rest: asyncio.Task[tuple[Clip, Voice]], seed: int) -> tuple[Clip, list[bytes]]:
        clip, _voice = await rest
        return await asyncio.to_thread(self._prepared, clip, seed, True)

    async def _synthesised(self, text: str, *, barging: bool
                           ) -> tuple[Clip, Voice, bool, asyncio.Task[tuple[Clip, Voice]] | None]:
        """`text` spoken by the persona's voice; whether it was synthesised ahead (and done by now); the rest of
        the line still being synthesised, when a barge-in's words, made only now, start with their first sentence."""
        ahead = await self._ahead.take(text)
        if ahead is not None:
            return (*ahead, None)
        if barging:
            clip, voice, rest = await _ahead.first_sentence(text, self.voice_name, self.behaviour.speaking_rate,
                                                            self._tally)
            return clip, voice, False, rest
        clip, voice = await tts.say(text, self.voice_name, self.behaviour.speaking_rate, tally=self._tally)
        return clip, voice, False, None

    def _synthesise_ahead(self) -> None:
        """Start synthesising the user side's next words while this line is said and answered, when the persona
        may talk over the answer: it then talks when its behaviour drew, not once the words are made."""
        upcoming = self.session.next_words
        words = upcoming() if upcoming is not None and self.behaviour.interrupt_probability > 0 else None
        if not words:
            return
        self._ahead.start(self.behaviour.planned_words(words))

    def _prepared(self, clip: Clip, seed: int, last: bool = True) -> tuple[Clip, list[bytes]]:
        """The utterance as the line carries it: louder or quieter, the noise under it, decoded from the wire
        (what is recorded) at the recording's rate, and in wire frames. The synthesis's inaudible tail is left
        off: the utterance (and `user_to_ms`, where time to first audio and the silence after it start) ends
        with its last audible sample, where an agent on a G.711 line hears it end (Piper's last 90-130 ms are
        under -60 dBFS, which mu-law and A-law carry as their silence). Not `last`: a first sentence said before the
        rest, whose quiet tail is the pause between the two."""
        audible = np.flatnonzero(np.abs(clip.samples.astype(np.int32)) > INAUDIBLE)
        if audible.size and last:
            clip = Clip(clip.samples[:audible[-1] + 1], clip.rate)
        clip = noise.gained(clip, self.behaviour.volume_db)
        self._speech_rms = noise.speech_rms(clip) or self._speech_rms
        if self.behaviour.noise is not None:
            clip = noise.mix(clip, self.behaviour.noise.name, self.behaviour.noise.level_db, seed)
        wire = clip.wire(self.send_format)
        # recorded as the line carries it (a G.711 line drops what is above 4 kHz): the metrics then hear the
        # caller as the agent does, and a talk-over timed by the agent finds the same speech
        # (at the recording's rate here: resampling a sentence on the loop held it tens of ms)
        return Clip.from_wire(wire, self.send_format).at(self.recorder.rate), frames(wire, self.send_format)

    async def keep_line_open(self, send_frame: Callable[[bytes], Awaitable[None]], stop: asyncio.Event) -> None:
        """Silence at wall-clock pace until `stop`: a caller's line stays open between utterances, so an agent
        that detects the end of speech itself (server VAD) hears the pause. With the persona's background
        noise `between`, the line carries that noise instead (recorded in `audio.wav`)."""
        rate = self.send_format.rate
        frame = frames(Clip.silence(20, rate).wire(self.send_format), self.send_format)[0]
        between = await asyncio.to_thread(self._line_noise)
        loop = asyncio.get_running_loop()
        loop_start = loop.time()
        step = self.pacer.frame_ms / 1000
        # one waiter for the whole line: a task per 20 ms frame (wait_for) costs the loop more than the frame
        stopped = asyncio.ensure_future(stop.wait())
        k = 0
        try:
            while not stop.is_set():
                if between is not None:
                    n = 20 * rate // 1000  # one 20 ms frame, the noise looped
                    start = (k % (between.size // n)) * n
                    piece = Clip(between[start:start + n], rate)
                    self.recorder.user(piece, self.session.now_ms())
                    frame = piece.wire(self.send_format)
                self.pacer.note((loop.time() - loop_start - k * step) * 1000)
                await send_frame(frame)
                k += 1
                delay = loop_start + k * step - loop.time()
                if delay > 0:
                    await asyncio.wait({stopped}, timeout=delay)
                else:  # behind after a stall: yield once a frame, as `Pacer.stream` does
                    await asyncio.sleep(0)
        finally:
            stopped.cancel()

    def _line_noise(self) -> np.ndarray | None:
        """Ten seconds of the persona's noise at the line's rate and level, looped between utterances."""
        chosen = self.behaviour.noise
        if chosen is None or not chosen.between:
            return None
        rate = self.send_format.rate
        if self._unit_noise is None:  # made once per conversation, set against each utterance's loudness
            self._unit_noise = noise.generate(chosen.name, 10_000, rate, self.behaviour.seed).samples.astype(np.float64)
        scaled = self._unit_noise * self._speech_rms * 10 ** (chosen.level_db / 20)
        return np.clip(np.round(scaled), -32768, 32767).astype(np.int16)

    # -- the agent speaks -----------------------------------------------------------------------------

    def listen_only(self) -> TurnAudio:
        """A turn the user says nothing in (the agent's greeting, more after a `wait_for`, the answer to
        digits): its reply is placed on the timeline like any other, and the persona does not talk over it."""
        turn = TurnAudio()
        self._current = turn
        self._interrupt_after = self._heard_from_ms = None
        self._listening_only = True
        return turn

    @property
    def current(self) -> TurnAudio | None:
        """The turn being spoken or answered now."""
        return self._current

    @property
    def last(self) -> TurnAudio | None:
        """The last turn that ended (the one a barge-in talks over)."""
        return self.turns[-1] if self.turns else None

    def agent_audio(self, data: bytes, *, arrived_ms: float | None = None, turn: TurnAudio | None = None,
                    paced: bool = False) -> float:
        """One chunk of the agent's audio, placed on the playback clock at its arrival and recorded, and
        counted in `turn`'s reply when given (audio of a cancelled response belongs to none). Returns its
        playback start (ms). `paced`: the line plays its audio out itself (`PlaybackClock.place`)."""
        try:
            clip = Clip.from_wire(data, self.receive_format)
        except ValueError as exc:
            raise AudioFormatError(f"{exc} (agreed: {self.receive_format})") from None
        now = self.session.now_ms() if arrived_ms is None else arrived_ms
        start = self.playback.place(now, clip.duration_ms, paced=paced)
        heard = clip.at(stt.WHISPER_RATE)  # resampled once, for the recording and for Whisper (both 16 kHz)
        self.recorder.agent(heard, start)
        if turn is not None:
            # the reply starts at its first chunk with a sound in it: a line that carries the agent's digital
            # silence between replies (a phone bridge) put it at the first silent frame, a time to first audio of 8 ms
            if turn.agent_from_ms is None and not _caller_talking(turn, now) and audible(heard.samples):
                turn.agent_from_ms = start
            if (turn is self._current and not self._listening_only and self._heard_from_ms is None
                    and turn.agent_from_ms is not None and rms(heard.samples) > SPEECH_RMS):
                # the persona talks over what it has heard of the reply: its timer starts at the reply's first
                # speech (the level every audio target tells speech by), not at a quiet or stray chunk
                self._heard_from_ms = start + first_sound(heard.samples.tobytes()) * 1000 / heard.rate
                self._interrupt_after = self.behaviour.interrupts()
            turn.agent_to_ms = start + clip.duration_ms
            turn.agent_audio_ms += clip.duration_ms
            self._hearing.add(turn, start, heard.samples)
        pending = self._pending_barge_in
        if pending is not None and pending.interrupted_at_ms is not None and now >= pending.interrupted_at_ms:
            # the talked-over reply goes on while the caller talks, and for as long as its audio keeps coming;
            # the next reply, after the caller's words and a pause, is not its tail (it made the stop the end
            # of the next reply)
            last = pending.agent_stopped_at_ms or now
            caller = self._current if self._current is not None and self._current is not pending else None
            if audible(heard.samples) and (now - last <= TAIL_GAP_MS
                                           or (caller is not None and _caller_talking(caller, now))):
                pending.agent_stopped_at_ms = max(last, now)  # a line's silence after the stop is no tail
        return start

    def earlier_reply(self, turn: TurnAudio | None, data: bytes, at_ms: float) -> tuple[str, bool] | None:
        """Why agent audio arriving at `at_ms`, before the reply to `turn` has started, is the rest of an earlier
        reply and not that reply, and whether it is speech; None when it may be the reply. It is when it came
        while the caller of `turn` was still speaking after talking over the last reply (`talked over`), before
        the caller's first word (`before the words`: the last reply went on after a pause that ended its turn),
        or when it goes on from such speech with no pause longer than TAIL_GAP_MS (a talked-over agent that
        never stops plays on after the caller's words: taken for the reply, it was "answered" in 20 ms with the
        end of the sentence the caller talked over, and the real answer came after the call had ended)."""
        if turn is None or not turn.said or turn.agent_from_ms is not None:
            return None
        last = self.last
        if last is not None and last.interrupted_at_ms is not None and _caller_talking(turn, at_ms):
            why = "talked over"
        elif turn.user_from_ms is None or at_ms < turn.user_from_ms:
            why = "before the words"
        elif self._earlier is not None and at_ms - self._earlier[0] <= TAIL_GAP_MS:
            why = self._earlier[1]
        else:
            return None
        try:
            speech = rms(Clip.from_wire(data, self.receive_format).samples) > SPEECH_RMS
        except ValueError:
            return None  # not audio in the agreed format: the target's own reading of it says so
        if speech:  # a line's silence or comfort noise between replies carries nothing on
            self._earlier = (at_ms, why)
        return why, speech

    def barge_in_due(self) -> bool:
        """The persona talks over this reply now: enough of it has played, as its behaviour drew."""
        if self._current is None or self._interrupt_after is None or self._heard_from_ms is None:
            return False
        due = self._heard_from_ms + self._interrupt_after
        if self.session.now_ms() < due:
            return False
        self._due_ms = due
        return True

    def hold_barge_in(self) -> None:
        """The persona talks over nothing more (it has nothing more to say): the reply plays to its end."""
        self._interrupt_after = self._due_ms = None

    def barge_in(self) -> TurnAudio | None:
        """The user starts talking over the last reply now: the player is flushed (as a client's is) and the
        reply is marked. Returns that turn; its stop is measured as the agent's audio keeps arriving."""
        turn = self.last
        if turn is None:
            return None
        now = self.session.now_ms()
        turn.interrupted_at_ms = now
        turn.agent_stopped_at_ms = now
        self._timed_barge_in(turn, now)
        self.playback.flush(now)
        self.recorder.cut_agent(now)
        if turn.agent_to_ms is not None:
            turn.agent_to_ms = min(turn.agent_to_ms, now)
        self._interrupt_after = self._heard_from_ms = None
        self._pending_barge_in = turn
        self.barge_ins += 1
        return turn

    def _timed_barge_in(self, turn: TurnAudio, now: float) -> None:
        """How late the barge-in into `turn` starts against the time its behaviour drew: in the reply's record,
        in the barging turn's `barge_in_late_ms`, and said (`barge_in_late`) past BARGE_IN_LATE_MS."""
        due, self._due_ms = self._due_ms, None
        if due is None:
            return
        turn.barge_in_due_ms = round(due, 3)
        late = max(0.0, now - due)
        self._late = (late, self._ready)
        if late > BARGE_IN_LATE_MS:
            why = ("its words had been synthesised ahead" if self._ready else
                   "its words were synthesised only then (a model's line, a hesitation drawn, or their synthesis "
                   "was still going on)")
            if self._in_parts:
                why += ", its first sentence said as the rest was made"
            data = {"in_parts": True} if self._in_parts else {}
            self.session.event("barge_in_late", late_ms=round(late, 1), due_at_ms=round(due, 1),
                               at_ms=round(now, 1), words_ready=self._ready, **data,
                               note=f"the persona talked over the reply {late:.0f} ms after its behaviour drew: {why}")

    def played_ms(self) -> int:
        """How much of the last reply the caller has heard (what a truncate says)."""
        turn = self.last
        if turn is None or turn.agent_from_ms is None:
            return 0
        heard_until = min(self.session.now_ms(), turn.agent_to_ms or 0.0)
        return max(0, int(heard_until - turn.agent_from_ms))

    def end_turn(self, heard: str | None = None) -> tuple[TurnAudio, dict[str, float]]:
        """The turn's audio record and its per-turn measures (time to first audio; the stop of a barge-in
        into the reply before it). `heard`: the reply as the target transcribed it (its turn's text): then
        that is what was heard, and the reply is not transcribed a second time (two transcriptions of one
        reply disagree)."""
        turn = self._current or TurnAudio()
        talked_over = self.barge_in_due()
        self._interrupt_after = None if turn is not self._current else self._interrupt_after
        self.turns.append(turn)
        if heard is not None:
            self._hearing.by_target(turn, heard)
        if self.hear_live and not self._listening_only and not talked_over:
            # else heard at the end, in finish(): Whisper during the call would take the CPU from the frames
            # of the conversations still talking and from an agent preparing its next words on this machine;
            # a reply the caller is about to talk over is heard once it stops (close_barge_in), not while its
            # stop is timed
            self._hearing.hear(turn)
        measures: dict[str, float] = {}
        if self._late is not None and turn is self._current:
            measures["barge_in_late_ms"] = round(self._late[0], 3)
        self._late = None
        if turn.agent_from_ms is not None and turn.user_to_ms is not None:
            measures["time_to_first_audio_ms"] = round(max(0.0, turn.agent_from_ms - turn.user_to_ms), 3)
        return turn, measures

    async def transcribe_now(self, clip: Clip, offset_ms: float = 0.0) -> str:
        """The agent's words in `clip` now, for a target that needs them during the call (its turn's text),
        counted with the other transcriptions in the `audio` event."""
        return await self._hearing.now(clip, offset_ms, self._current)

    async def transcribe_by(self, clip: Clip, offset_ms: float, until: float | None, *,
                            bound: str = "in the wait_for's time") -> str | None:
        """`transcribe_now`, done by `until` when given (monotonic: a `wait_for`'s end, or a turn's `turn_timeout`:
        `bound` says which, as the note ends "heard but not transcribed <bound>"): else None, and the speech heard
        but not transcribed is recorded in the current turn (`untranscribed_ms`) and said (`transcription_cut`); a
        job nothing would wait for is not started (the worker is left to the turns still read), and the words are
        heard after the call, for the record (`end_turn(heard=None)`). Under 0.2 s: ""."""
        return await self._hearing.by(clip, offset_ms, until, bound, lambda: self._current)

    @property
    def stop_pending(self) -> bool:
        """A reply was talked over and its stop is not closed yet: its audio is still being timed."""
        return self._pending_barge_in is not None

    def close_barge_in(self) -> float | None:
        """The stop time of the last barge-in, once its reply's audio has ended: interruption_stop_ms."""
        turn = self._pending_barge_in
        if turn is None or turn.interrupted_at_ms is None or turn.agent_stopped_at_ms is None:
            return None
        self._pending_barge_in = None
        if self.hear_live:
            self._hearing.hear(turn)
        return round(turn.agent_stopped_at_ms - turn.interrupted_at_ms, 3)

    # -- the end of the run ---------------------------------------------------------------------------

    async def finish(self, turns: Sequence[object] | None = None) -> dict[str, float]:
        """Write audio.wav, transcribe the agent's replies, and compute the run's audio metrics (into
        the session's counters, which the engine reads after close)."""
        self._hearing.in_call = False
        self._ahead.cancel()
        self._lag.release()
        paced = {**self.pacer.lateness(), **self._lag.since(self._lag_mark)}
        self.session.artifacts_dir.mkdir(parents=True, exist_ok=True)
        path = self.session.artifacts_dir / WAV_NAME
        # both tracks are built once, off the loop (numpy over the whole call held it 50-100 ms at 16 at once)
        user, agent = await asyncio.to_thread(self.recorder.tracks)
        await asyncio.to_thread(self.recorder.write, path, (user, agent))
        for turn in self.turns:
            self._hearing.hear(turn)  # a reply still playing when its turn ended (a barge-in) has audio left here
        await self._hearing.done()
        result = await asyncio.to_thread(audio_metrics.compute, user, agent, self.turns)
        self.session.event("audio", file=WAV_NAME, seconds=round(self.recorder.length() / self.recorder.rate, 3),
                           voice=self._voice_said(), barge_ins=self.barge_ins,
                           late_frame_ms_max=round(self.pacer.late_ms_max, 1), synthesised=self._tally.made,
                           synthesis_reused=self._tally.reused, **paced, **self._hearing.counts())
        result.update({k: v for k, v in paced.items() if k != "frames_sent"})
        for name, value in result.items():
            self.session.counters[name] = value
        return result

    def _voice_said(self) -> str | None:
        """The voice the user spoke with: the persona's, or the default one (the event said null for it, while
        the turns named it); the persona's name when it said nothing."""
        return next((turn.voice for turn in self.turns if turn.voice), self.voice_name)


BARGE_IN_LATE_MS = 250.0
"""A barge-in this much later than its behaviour drew is said (`barge_in_late`): a fifth of the range the delay is
drawn from (300-1200 ms of the reply)."""
TAIL_GAP_MS = 300.0
"""A talked-over reply's audio that comes this soon after its last chunk is still its tail (chunks come every 20
to 100 ms, in bursts further apart on a loaded machine); later, after the caller stopped, it is the next
reply."""


def _caller_talking(turn: TurnAudio, at_ms: float) -> bool:
    """Whether audio arriving at `at_ms` came before the caller of `turn` had finished speaking: then it is
    not the start of the reply to it, but the rest of the reply before (a stray chunk of the one the caller
    talked over, sent after the agent's stop) or the agent talking while the caller does."""
    return bool(turn.said) and (turn.user_to_ms is None or at_ms < turn.user_to_ms)
