"""Where a SIP call's audio is placed in time (tamesu.audio.pacing, tamesu.audio.level): the line carries its
silence in 100 ms chunks at its own media clock, so a reply starts at its first loud sample inside a chunk, and a
chunk plays when it arrives even after a few were handed over together (before: up to 78 ms late for the rest of
the call, and the reply's start up to 100 ms early, both in time to first audio)."""

from __future__ import annotations

import numpy as np

from tamesu.audio.level import first_sound
from tamesu.audio.pacing import PlaybackClock


def test_a_reply_starts_at_its_first_loud_sample_in_the_chunk() -> None:
    chunk = np.zeros(800, dtype="<i2")  # 100 ms at 8 kHz
    chunk[480:] = 2000  # the reply's first word 60 ms in
    chunk[100] = 200  # the line's faint crackle is no speech
    assert first_sound(chunk.tobytes()) == 480
    assert first_sound(np.zeros(800, dtype="<i2").tobytes()) == 0


def test_a_paced_line_plays_each_chunk_as_it_arrives() -> None:
    paced, queued = PlaybackClock(), PlaybackClock()
    arrivals = [0.0, 1.0, 2.0, 100.0, 200.0, 300.0]  # three chunks handed over at once, then on time
    for at in arrivals:
        paced.place(at, 100.0, paced=True)
        queued.place(at, 100.0)
    assert paced.place(400.0, 100.0, paced=True) == 400.0
    # a player queue (a websocket agent's burst) keeps them back, as a caller's player would
    assert queued.place(400.0, 100.0) == 600.0
    assert paced.cursor_ms == 500.0
