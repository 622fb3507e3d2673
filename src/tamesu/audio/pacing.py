"""Time as a caller lives it.

`Pacer` sends the user's audio at wall-clock pace: frame k leaves at start + k * 20 ms, against the
monotonic clock (a late frame does not push the next ones back, so the stream never drifts).

`PlaybackClock` places the agent's audio where a caller would hear it: a chunk starts playing when it
arrives or when the audio before it has finished, whichever is later. An agent that sends 5 s of audio in
a burst is heard for 5 s, so its later words are not credited as early speech; barge-in flushes what is
queued, as a client's player does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tamesu.audio.formats import FRAME_MS


class Pacer:
    def __init__(self, frame_ms: int = FRAME_MS) -> None:
        self.frame_ms = frame_ms
        self.late_ms_max = 0.0
        """The latest any frame left compared with its slot (a loaded machine shows here)."""

    async def stream(self, frames: list[bytes], send: Callable[[bytes], Awaitable[None]],
                     stop: asyncio.Event | None = None) -> int:
        """Send every frame at its slot; returns how many went (fewer when `stop` was set)."""
        start = time.monotonic()
        for k, frame in enumerate(frames):
            if stop is not None and stop.is_set():
                return k
            slot = start + k * self.frame_ms / 1000
            delay = slot - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                self.late_ms_max = max(self.late_ms_max, -delay * 1000)
            await send(frame)
        return len(frames)


class PlaybackClock:
    """Where each chunk of the agent's audio plays, in ms of the session's timeline."""

    def __init__(self) -> None:
        self.cursor_ms = 0.0
        """When the audio received so far has finished playing."""

    def place(self, arrived_ms: float, duration_ms: float) -> float:
        """The playback start of a chunk that arrived at `arrived_ms`."""
        start = max(arrived_ms, self.cursor_ms)
        self.cursor_ms = start + duration_ms
        return start

    def playing_at(self, now_ms: float) -> bool:
        return self.cursor_ms > now_ms

    def flush(self, at_ms: float) -> float:
        """Stop playback at `at_ms` (barge-in); returns the ms of queued audio that will never play."""
        dropped = max(0.0, self.cursor_ms - at_ms)
        self.cursor_ms = min(self.cursor_ms, at_ms)
        return dropped
