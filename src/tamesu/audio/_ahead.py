"""The user side's next words synthesised while the line before them is said and answered, so a persona that
talks over the answer starts when its behaviour drew, not once its words are made (docs/voice.md)."""

from __future__ import annotations

import asyncio

from tamesu.audio import tts
from tamesu.audio.clip import Clip
from tamesu.audio.voices import Voice


class Ahead:
    """At most one line's synthesis, started before the line is said."""

    def __init__(self, voice_name: str | None, speaking_rate: float) -> None:
        self.voice_name = voice_name
        self.speaking_rate = speaking_rate
        self._next: tuple[str, asyncio.Task[tuple[Clip, Voice]]] | None = None

    def start(self, words: str) -> None:
        """Synthesise `words` now, in the background (another line started before is dropped)."""
        self.cancel()
        task = asyncio.ensure_future(tts.say(words, self.voice_name, self.speaking_rate))
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
