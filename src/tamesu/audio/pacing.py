"""Time as a caller lives it.

`Pacer` sends the user's audio at wall-clock pace: frame k leaves at start + k * 20 ms, against the
monotonic clock (a late frame does not push the next ones back, so the stream never drifts). It notes how
late every frame left (0 when on time); `lateness()` gives the p50, p99 and max of a conversation, which the
run records as metrics (a loaded machine, or a stage that blocks the event loop, shows there).

`PlaybackClock` places the agent's audio where a caller would hear it: a chunk starts playing when it
arrives or when the audio before it has finished, whichever is later. An agent that sends 5 s of audio in
a burst is heard for 5 s, so its later words are not credited as early speech; barge-in flushes what is
queued, as a client's player does.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence

from tamesu.audio.formats import FRAME_MS


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` percentile (0-100) of `values` (0 for none): a value that was measured."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class Pacer:
    def __init__(self, frame_ms: int = FRAME_MS) -> None:
        self.frame_ms = frame_ms
        self.lates: list[float] = []
        """How late each frame sent so far left compared with its slot, in ms (0: on time)."""

    @property
    def late_ms_max(self) -> float:
        """The latest any frame left compared with its slot."""
        return max(self.lates, default=0.0)

    def note(self, late_ms: float) -> None:
        """One frame left `late_ms` after its slot (a caller's open line between utterances counts too)."""
        self.lates.append(max(0.0, late_ms))

    def lateness(self) -> dict[str, float]:
        """The run's frame lateness: p50, p99 and max in ms, and how many frames went."""
        return {"frame_late_ms_p50": round(percentile(self.lates, 50), 2),
                "frame_late_ms_p99": round(percentile(self.lates, 99), 2),
                "frame_late_ms_max": round(self.late_ms_max, 2), "frames_sent": float(len(self.lates))}

    async def stream(self, frames: list[bytes], send: Callable[[bytes], Awaitable[None]],
                     stop: asyncio.Event | None = None) -> int:
        """Send every frame at its slot; returns how many went (fewer when `stop` was set)."""
        start = time.monotonic()
        for k, frame in enumerate(frames):
            if stop is not None and stop.is_set():
                return k
            slot = start + k * self.frame_ms / 1000
            delay = slot - time.monotonic()
            # a frame already due still yields once: a conversation catching up after a stall does not send
            # its backlog in one go while every other conversation's due frames wait behind it
            await asyncio.sleep(max(0.0, delay))
            # measured after the sleep: the loop wakes a sleeper late when something blocks it
            self.note((time.monotonic() - slot) * 1000)
            await send(frame)
        return len(frames)


class PlaybackClock:
    """Where each chunk of the agent's audio plays, in ms of the session's timeline."""

    def __init__(self) -> None:
        self.cursor_ms = 0.0
        """When the audio received so far has finished playing."""

    def place(self, arrived_ms: float, duration_ms: float, *, paced: bool = False) -> float:
        """The playback start of a chunk that arrived at `arrived_ms`. A `paced` chunk comes off a line that
        plays its audio out itself (a SIP call's media clock): it plays as it arrives, never after the cursor,
        which a few chunks handed over together once would otherwise keep ahead for the rest of the call."""
        start = arrived_ms if paced else max(arrived_ms, self.cursor_ms)
        self.cursor_ms = max(self.cursor_ms, start + duration_ms)
        return start

    def playing_at(self, now_ms: float) -> bool:
        return self.cursor_ms > now_ms

    def flush(self, at_ms: float) -> float:
        """Stop playback at `at_ms` (barge-in); returns the ms of queued audio that will never play."""
        dropped = max(0.0, self.cursor_ms - at_ms)
        self.cursor_ms = min(self.cursor_ms, at_ms)
        return dropped
