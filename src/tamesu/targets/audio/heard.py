"""What one listening to the agent on an audio socket gathered, and the words made of it (its own module to keep
the socket's small)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tamesu.errors import OwnSideError

if TYPE_CHECKING:  # numpy comes with the voice extra: a text-mode target of this kind runs without it
    import numpy as np

    from tamesu.audio.clip import Clip
    from tamesu.audio.conversation import AudioConversation
    from tamesu.conversation import AgentTurn


@dataclass
class Heard:
    """What one listening gathered."""

    pcm: list[np.ndarray] = field(default_factory=list)
    spoke_at: float | None = None
    quiet_from: float | None = None
    """The playback end of the agent's last loud chunk."""
    audio_ms: float = 0.0
    arrivals: list[tuple[float, float]] = field(default_factory=list)
    """Each audio chunk's arrival (ms on the session's clock) and duration: a burst from a steady stream."""
    controls: list[dict[str, Any]] = field(default_factory=list)
    earlier: dict[str, list[float]] = field(default_factory=dict)
    """Audio of an earlier reply that came while waiting for this one (`AudioConversation.earlier_reply`'s why):
    where it played, from and to (ms)."""

    def set_aside(self, earlier: tuple[str, bool], start_ms: float, at_ms: float, data: bytes, fmt: Any) -> None:
        """A chunk of an earlier reply (why, whether it is speech; `fmt`: the agreed AudioFormat) that arrived at
        `at_ms`, placed to play at `start_ms`: where its speech played is said, and it counts in the audio that
        came (an agent flooding the line before the caller's words is still a flood)."""
        why, speech = earlier
        duration = len(data) * 1000 / (fmt.rate * (2 if fmt.encoding == "pcm16" else 1))
        self.audio_ms += duration
        self.arrivals.append((at_ms, duration))
        if speech:
            self.earlier.setdefault(why, [start_ms, start_ms + duration])[1] = start_ms + duration

    def reply_starts(self, start_ms: float, audio: Any) -> float | None:
        """The reply's first speech, playing at `start_ms`, as its first token: None when it came before the
        caller's words it answers had ended (`audio`, the turn's TurnAudio), said instead (`earlier_said`). An agent
        that talks over the caller answered 2.1 s "before" it was asked: a time to first token of -2132 ms went into
        the run's percentiles, and an SLO on it passed."""
        said, ended = getattr(audio, "said", ""), getattr(audio, "user_to_ms", None)
        if said and ended is not None and start_ms < ended:
            self.earlier["over the words"] = [start_ms, ended]
            return None
        return start_ms

    def earlier_said(self, idle_s: float) -> list[dict[str, Any]]:
        """What the `agent_spoke_before_reply` events say: the earlier reply's audio not taken for this one, and a
        reply that started while the caller was still speaking."""
        return [{"from_ms": round(start, 1), "to_ms": round(end, 1), "why": _EARLIER[why].format(idle=idle_s)}
                for why, (start, end) in self.earlier.items()]


_EARLIER = {
    "before the words": "the agent's reply before went on after {idle:g}s of silence (idle) had ended its turn; it "
                        "came before the user's words, so it is not the reply to them (is idle shorter than the "
                        "pauses in its replies?)",
    "talked over": "the reply the user talked over played on, after the user's words too; it is not the reply "
                   "to them",
    "over the words": "the agent started its reply while the user was still speaking (from_ms to the end of the "
                      "user's words, to_ms): no time to first audio or token is measured for it",
}


async def transcribed(voice: AudioConversation, heard: Heard, started: float = 0.0, wait_s: float | None = None,
                      greeting: bool = False, grace_s: float = 0.0, heard_out: float | None = None) -> str | None:
    """tamesu's speech-to-text of what one listening heard, from the agent's first sound; empty for under
    0.2 s of it. A listening begun at `started` (monotonic) for a `wait_for` (listening on for `wait_s`, or a
    greeting a script's first wait is for: `Session.greeting_wait_s`) is transcribed by the wait's end, plus
    `grace_s` when it was heard out (at `heard_out`, monotonic; default now) before it (`wait_until`): None when
    the words are not transcribed by then, which is said (`transcription_cut`): the speech was heard. Any other
    reply within `grace_s` (`words_by`)."""
    if not heard.pcm:
        return ""
    import numpy as np

    samples = np.concatenate(heard.pcm)
    if samples.size < 3200:
        return ""
    from tamesu.audio import stt
    from tamesu.audio.clip import Clip

    until = wait_until(voice.session.greeting_wait_s if greeting else wait_s, started, grace_s, heard_out)
    return await words_by(voice, Clip(samples, stt.WHISPER_RATE), heard.spoke_at or 0.0, until, grace_s)


async def words_by(voice: AudioConversation, clip: Clip, offset_ms: float, until: float | None,
                   limit_s: float) -> str | None:
    """The words of a reply read during the call: by `until` when a `wait_for` listened for it (`wait_until`;
    None when they were not, which the wait's step says). Any other (`until` None: a simulator, a capture, a
    script's next step reads it) within `limit_s`, its turn's turn_timeout, from now that it was heard out, as
    `wait_until` gives a wait: not transcribed by then, the turn is not decided (`not_transcribed`). Unbounded, a
    loaded machine's Whisper held the call past every timeout the suite set."""
    if until is not None:
        return await voice.transcribe_by(clip, offset_ms, until)
    words = await voice.transcribe_by(clip, offset_ms, time.monotonic() + limit_s,
                                      bound=f"within turn_timeout ({limit_s:g}s) after it was heard out")
    if words is None:
        raise not_transcribed(clip.duration_ms, limit_s)
    return words


def wait_until(wait_s: float | None, started: float, grace_s: float, heard_out: float | None = None) -> float | None:
    """When the transcription of what a `wait_for`'s listening heard must be done (monotonic), or None (no wait:
    unbounded). The wait ends at `started + wait_s` (a late look's `wait_s` is negative: its end had passed when it
    began). An utterance heard out before that end (at `heard_out`, monotonic: the end of its speech and the `idle`
    that told it was over, on the line's clock; default now) heard the agent in time, however long tamesu's
    speech-to-text then takes to read it, or took to read the one before (a loaded machine's seconds of Whisper made
    such a wait undecided, exit 3): it has `grace_s` more (the target's turn_timeout, which bounds every turn). An
    utterance heard out past the wait's end has none: whether the phrase came before the end is not known from its
    words."""
    if wait_s is None:
        return None
    end = started + wait_s
    return end + grace_s if (time.monotonic() if heard_out is None else heard_out) < end else end


def late_look(wait_s: float | None) -> bool:
    """Whether a `wait_for`'s listening is a late look (`Target.listen` with a timeout of 0 or less): its end has
    passed, and only what the agent said before it counts (speech tamesu heard while it transcribed the utterance
    before, and had not read yet)."""
    return wait_s is not None and wait_s <= 0


def not_by(by_ms: float | None, spoke_at: float | None, came: float | None, more: bool) -> bool:
    """Whether a late look (`by_ms`: its wait's end, ms on the session's clock; None for any other listening) is
    over with nothing heard in time: before the agent's speech, nothing more had come by the end (`came`: when the
    message just read arrived, None when none did; `more`: messages still queued), or its speech (`spoke_at`: where
    it began to play) began after the end, which no listener heard before it."""
    if by_ms is None:
        return False
    if spoke_at is None:
        return came is None or came > by_ms or not more
    return spoke_at > by_ms


def not_transcribed(speech_ms: float, limit_s: float) -> OwnSideError:
    """A reply read during the call (a script's next step, a capture, a simulator) whose words were not transcribed
    within its turn's `turn_timeout` (`limit_s`; `transcribe_by`'s None): its speech was heard and what reads its
    words would read none of them, so the run is not decided, the environment's error (exit 3), not the agent's
    failure, whatever flag reclassifies the agent's side (`--yao-errors`)."""
    return OwnSideError(f"the agent's reply ({speech_ms / 1000:.1f}s of speech) was heard but not transcribed "
                        f"within turn_timeout ({limit_s:g}s): not decided, what reads its words during the call "
                        "would read none of them (tamesu's speech-to-text was behind: a loaded machine? a longer "
                        "turn_timeout gives it time)")


def listening_notes(heard: Heard, idle_s: float, fmt: Any, rate_key: str) -> list[tuple[str, dict[str, Any]]]:
    """The events a listening ends with: each `agent_spoke_before_reply`, and `audio_slow_pace` (`slow_pace`)."""
    from tamesu.targets.audio.burst import slow_pace  # burst reads Heard: imported when it runs

    slow = slow_pace(heard, fmt, rate_key)
    return [*(("agent_spoke_before_reply", said) for said in heard.earlier_said(idle_s)),
            *([("audio_slow_pace", {"detail": slow})] if slow else [])]


def hung_up(session: Any, heard: Heard, played_to_ms: float, reason: str | None) -> None:
    """The agent closed the socket after speaking in this turn: a `hangup` event, and `agent_hung_up_mid_speech`
    too when its last chunk (ending at `played_to_ms`) was speech, the line cut in the middle of a word (a reply
    "I can both take." was taken as it came, and only the content assertion's failure said anything)."""
    session.event("hangup", by="agent", reason=reason)
    if heard.quiet_from is not None and abs(played_to_ms - heard.quiet_from) < 1:
        session.event("agent_hung_up_mid_speech", at_ms=round(heard.quiet_from, 1), reason=f"{reason}: its "
                      "audio was still speech when the socket closed, so its reply may be cut short")


def read_after_call(session: Any, turn: AgentTurn, after_call: list[AgentTurn], *, talked_over: bool = False) -> bool:
    """Whether `turn`'s words wait for the call's end: nothing reads them during it (`Session.reads_reply`: a
    script's `say`s, no capture), or the caller talks over the reply now (transcribing first held the barge-in
    back by Whisper's seconds, and heard only what had come). It is then in `after_call`, its text what was heard,
    once the call's audio is transcribed (`take_what_was_heard`), not against the CPU of an agent that shares the
    machine."""
    reads = session.reads_reply
    if not talked_over and (reads is None or reads()):
        return False
    after_call.append(turn)
    return True


def take_what_was_heard(talked_over: list[AgentTurn]) -> None:
    """Once the call's audio is transcribed: each reply talked over without words of its own takes what the
    caller heard of it, up to the barge-in."""
    for turn in talked_over:
        turn.text = (getattr(turn.audio, "agent_said", None) or "").strip()
        if turn.raw and isinstance(turn.raw[-1], dict) and "heard" in turn.raw[-1]:
            turn.raw[-1]["heard"] = turn.text
    talked_over.clear()


def unheard(heard: Heard, wire: Any, voice: AudioConversation | None, flood: str | None, idle_s: float) -> str:
    """Why an agent seemed to say nothing: the wire's own hint (`silence_hint`: a configuration that finds no
    audio), else, when audio came, that none of it was speech in the agreed format (pcm16 sent where mu-law
    was agreed, 8 kHz where 16 kHz was; it read "the agent said nothing" of 5.3 s of audio)."""
    if said := (wire.silence_hint() if wire is not None else ""):
        return str(said)
    if heard.earlier:  # all it said was an earlier reply's
        return "".join(f"; {said['why']} ({(said['to_ms'] - said['from_ms']) / 1000:.1f}s of it)"
                       for said in heard.earlier_said(idle_s)) + (f" ({flood})" if flood else "")
    if heard.audio_ms <= 0:
        return ""
    came = f"{heard.audio_ms / 1000:.1f}s of audio came"
    agreed = voice.receive_format if voice is not None else "the agreed format"
    return (f"; {came} ({flood})" if flood else f"; {came}") + (
        f", none of it speech as {agreed}: is that the encoding and rate the agent sends?")
