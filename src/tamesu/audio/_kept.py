"""The recordings a run has synthesised, kept so a line said again in the same run is not synthesised again.

A suite repeated (`repeat:`, tests that open with the same scripted line, `--parallel`) says the same words in the
same voice over and over: a load test of 16 callers of one script made 16 identical syntheses at its start, each
0.3-0.5 s of a core taken from the frames of the calls already talking. A recording is keyed by everything that
decides its audio: the engine and its voice (Piper's model file, espeak-ng's voice and variant), the speaking rate
(Piper's length scale, espeak-ng's words a minute) and the text. Its format is the voice's own (16-bit mono PCM at
the voice's sample rate): each call resamples and encodes it for its own line, with its own gain and noise, into new
arrays, so a kept recording is read-only. The kept recordings are bounded in bytes (`KEPT_BYTES`), the one said
longest ago dropped first.

Callers asking for words being synthesised share the one synthesis. One that stops waiting (a line synthesised
ahead and then not said, a test that timed out) leaves it to the others; the last one to stop cancels it, so an
espeak-ng process ends with it (`tts._espeak_say` kills it) and nothing is kept of it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tamesu.audio.clip import Clip

KEPT_BYTES = 32 * 1024 * 1024
"""Some 12 minutes of speech at Piper's 22.05 kHz (a 5 s sentence is about 220 kB)."""

Key = tuple[str, str, float, str]
"""engine, voice (Piper's model file, espeak-ng's `-v`), speaking rate, text."""


@dataclass
class Tally:
    """One conversation's lines: the syntheses started for it, and the lines it had without one of its own (kept
    from earlier in the run, or shared with a caller asking at the same time). The `audio` event records both."""

    made: int = 0
    reused: int = 0


class _Making:
    def __init__(self, task: asyncio.Task[Clip]) -> None:
        self.task = task
        self.waiting = 0


class Kept:
    def __init__(self, max_bytes: int = KEPT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._clips: OrderedDict[Key, Clip] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        """The recordings are shared by every loop of the process (a test's agents serve on loops of their own)."""
        self._making: dict[tuple[asyncio.AbstractEventLoop, Key], _Making] = {}

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __contains__(self, key: Key) -> bool:
        return key in self._clips

    async def get(self, key: Key, make: Callable[[], Awaitable[Clip]], tally: Tally | None = None) -> Clip:
        """The recording of `key`: kept, being made for another caller, or made now by `make`."""
        with self._lock:
            kept = self._clips.get(key)
            if kept is not None:
                self._clips.move_to_end(key)
        if kept is not None:
            _count(tally, made=False)
            return kept
        loop = asyncio.get_running_loop()
        # a synthesis is shared on its own loop only: a task cannot be awaited from another (a server's thread)
        where = (loop, key)
        making = self._making.get(where)
        _count(tally, made=making is None)
        if making is None:
            making = self._making[where] = _Making(loop.create_task(self._made(key, make)))
            making.task.add_done_callback(lambda done: self._forget(where, done))
        making.waiting += 1
        try:
            # shielded: one caller that stops waiting does not cancel the synthesis the others wait for
            return await asyncio.shield(making.task)
        finally:
            making.waiting -= 1
            if making.waiting == 0 and not making.task.done():
                making.task.cancel()  # nobody waits for these words any more

    async def _made(self, key: Key, make: Callable[[], Awaitable[Clip]]) -> Clip:
        clip = await make()
        clip.samples.flags.writeable = False
        self._keep(key, clip)
        return clip

    def _keep(self, key: Key, clip: Clip) -> None:
        size = clip.samples.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._clips.pop(key, None)
            if old is not None:
                self._bytes -= old.samples.nbytes
            self._clips[key] = clip
            self._bytes += size
            while self._bytes > self.max_bytes:
                _key, dropped = self._clips.popitem(last=False)
                self._bytes -= dropped.samples.nbytes

    def _forget(self, where: tuple[asyncio.AbstractEventLoop, Key], done: asyncio.Task[Clip]) -> None:
        if self._making.get(where) is not None and self._making[where].task is done:
            del self._making[where]
        if not done.cancelled():
            done.exception()  # retrieved: a failure its callers stopped waiting for is nobody's to log


def _count(tally: Tally | None, *, made: bool) -> None:
    if tally is None:
        return
    if made:
        tally.made += 1
    else:
        tally.reused += 1
