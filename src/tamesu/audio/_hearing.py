"""What tamesu heard the agent say: each reply's audio as placed on the playback clock, transcribed off the event
loop when its turn ends (`hear_live`) or once the call is over, and the transcriptions a target asks for during
the call (its turn's text), counted for the `audio` event."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from tamesu.audio import stt
from tamesu.audio.clip import Clip
from tamesu.conversation import Session, TurnAudio


class Hearing:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.in_call = True
        self._reply_audio: dict[int, list[tuple[float, np.ndarray]]] = {}
        """Each turn's reply audio as placed (by the turn's id), transcribed when the turn ends."""
        self._tasks: list[asyncio.Task[None]] = []
        self._heard_parts: dict[int, int] = {}
        self._by_target: set[int] = set()
        self._log: list[dict[str, float | bool]] = []

    def add(self, turn: TurnAudio, start: float, samples: np.ndarray) -> None:
        """A chunk of `turn`'s reply (at Whisper's rate), playing from `start` (ms)."""
        self._reply_audio.setdefault(id(turn), []).append((start, samples))

    def by_target(self, turn: TurnAudio, heard: str) -> None:
        """The reply as the target transcribed it: what was heard, never transcribed a second time (two
        transcriptions of one reply disagree)."""
        turn.agent_said = heard
        self._by_target.add(id(turn))

    def hear(self, turn: TurnAudio) -> None:
        """Transcribe the turn's reply off the event loop now. A barge-in later only shortens what was heard."""
        cut = turn.interrupted_at_ms  # what was queued to play after the barge-in was flushed, never heard
        parts = [(s, a) for s, a in self._reply_audio.get(id(turn), []) if cut is None or s < cut]
        if (id(turn) in self._by_target or not parts or turn.agent_from_ms is None
                or self._heard_parts.get(id(turn)) == len(parts)):
            return
        self._heard_parts[id(turn)] = len(parts)
        origin = parts[0][0]
        length = max(int((s - origin) * stt.WHISPER_RATE / 1000) + a.size for s, a in parts)
        track = np.zeros(length, dtype=np.int32)
        for start, samples in parts:
            at = int((start - origin) * stt.WHISPER_RATE / 1000)
            track[at:at + samples.size] += samples
        if cut is not None:
            track = track[:max(0, int((cut - origin) * stt.WHISPER_RATE / 1000))]
        clip = Clip(np.clip(track, -32768, 32767).astype(np.int16), stt.WHISPER_RATE)

        self._note()

        async def hear() -> None:
            heard = await stt.transcribe_off_loop(clip, origin)
            if self._heard_parts.get(id(turn)) == len(parts):  # not overtaken by a later, longer hearing
                turn.agent_said = heard.text
                turn.agent_said_cut = heard.cut
                self._said_cut(heard, clip, origin)

        self._tasks.append(asyncio.create_task(hear()))

    def _note(self) -> None:
        self._log.append({"at_ms": round(self.session.now_ms(), 1), "during_call": self.in_call})

    async def now(self, clip: Clip, offset_ms: float = 0.0, turn: TurnAudio | None = None) -> str:
        """The agent's words in `clip` now (a reply of `turn`'s, which is marked when Whisper's bound cut them)."""
        self._note()
        heard = await stt.transcribe_off_loop(clip, offset_ms)
        if heard.cut and turn is not None:
            turn.agent_said_cut = True
        self._said_cut(heard, clip, offset_ms)
        return heard.text

    def _said_cut(self, heard: stt.Transcription, clip: Clip, offset_ms: float) -> None:
        """A transcription Whisper's token bound stopped is said (`transcription_bounded`): its words may repeat a
        phrase it looped on, and what was said after the loop is missing."""
        if heard.cut:
            seconds = clip.duration_ms / 1000
            bound = stt.token_bound(seconds)
            self.session.event("transcription_bounded", from_ms=round(offset_ms, 1),
                               heard_ms=round(clip.duration_ms, 1), tokens=bound,
                               note=f"Whisper's decoding of {seconds:.1f}s of the agent's speech stopped at its bound "
                                    f"({bound} tokens): the text may repeat a phrase it looped on, and misses what "
                                    f"was said after it")

    async def by(self, clip: Clip, offset_ms: float, until: float | None, bound: str,
                 current: Callable[[], TurnAudio | None]) -> str | None:
        """`now`, done by `until` when given (monotonic; `bound` says what it is); else None, the speech not
        transcribed recorded in the `current` turn and said (AudioConversation.transcribe_by)."""
        if clip.duration_ms < 200:
            return ""
        if until is None:
            return await self.now(clip, offset_ms, current())
        left = until - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return await asyncio.wait_for(self.now(clip, offset_ms, current()), left)
        except TimeoutError:
            cut_ms = round(clip.duration_ms, 1)
            turn = current()
            if turn is not None:
                turn.untranscribed_ms = cut_ms
            self.session.event("transcription_cut", from_ms=round(offset_ms, 1), heard_ms=cut_ms,
                               note=f"{cut_ms / 1000:.1f}s of the agent's speech was heard but not transcribed "
                                    f"{bound}: the turn's text has none of it")
            return None

    async def done(self) -> None:
        """Every transcription started has ended."""
        if self._tasks:
            await asyncio.gather(*self._tasks)

    def counts(self) -> dict[str, int]:
        return {"transcribed_during_call": sum(1 for h in self._log if h["during_call"]),
                "transcribed_after_call": sum(1 for h in self._log if not h["during_call"])}
