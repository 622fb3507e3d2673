"""The user side's next words synthesised while the line before them is said and answered, so a persona that
talks over the answer starts when its behaviour drew, not once its words are made (docs/voice.md)."""

from __future__ import annotations

import asyncio
import re
import time

import numpy as np

from tamesu.audio import tts
from tamesu.audio._kept import Tally
from tamesu.audio.clip import Clip
from tamesu.audio.voices import Voice

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
HEADROOM = 0.8
"""The rest of a line is said after its first sentence when its synthesis, timed by the first's, should be done
within this share of the first sentence's length: else there would be a pause inside the line, which an agent that
detects the end of speech itself takes for the end of the turn."""


class Ahead:
    """At most one line's synthesis, started before the line is said."""

    def __init__(self, voice_name: str | None, speaking_rate: float, tally: Tally | None = None) -> None:
        self.voice_name = voice_name
        self.speaking_rate = speaking_rate
        self.tally = tally
        self._next: tuple[str, asyncio.Task[tuple[Clip, Voice]]] | None = None

    def start(self, words: str) -> None:
        """Synthesise `words` now, in the background (another line started before is dropped)."""
        self.cancel()
        task = asyncio.ensure_future(tts.say(words, self.voice_name, self.speaking_rate, tally=self.tally))
        # words never said: their synthesis's failure is nobody's (the line said instead fails on its own)
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._next = (words, task)

    async def take(self, text: str) -> tuple[Clip, Voice, bool] | None:
        """`text` as synthesised ahead, and whether it was done by now; None when other words were (a hesitation
        drawn, a captured value changed): their synthesis is dropped."""
        ahead, self._next = self._next, None
        if ahead is None:
            return None
        if ahead[0] != text:
            ahead[1].cancel()
            return None
        ready = ahead[1].done()
        clip, voice = await ahead[1]
        return clip, voice, ready

    def cancel(self) -> None:
        """The words the conversation never came to."""
        if self._next is not None:
            self._next[1].cancel()
            self._next = None


async def first_sentence(text: str, voice_name: str | None, speaking_rate: float, tally: Tally | None = None
                         ) -> tuple[Clip, Voice, asyncio.Task[tuple[Clip, Voice]] | None]:
    """`text` made only as it is to be said (a model's line talking over a reply): its first sentence, and the rest
    being synthesised while that is said, when the rest will be ready in time (HEADROOM); else the whole line."""
    first, *others = SENTENCE_END.split(text.strip(), maxsplit=1)
    began = time.monotonic()
    clip, voice = await tts.say(first if others else text, voice_name, speaking_rate, tally=tally)
    if not others:
        return clip, voice, None
    rest = others[0]
    took = time.monotonic() - began
    task = asyncio.ensure_future(tts.say(rest, voice_name, speaking_rate, tally=tally))
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    if took * len(rest) / len(first) <= HEADROOM * clip.duration_ms / 1000:
        return clip, voice, task
    after, _voice = await task
    return Clip(np.concatenate([clip.samples, after.at(clip.rate).samples]), clip.rate), voice, None
