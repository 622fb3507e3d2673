"""`silence_gap_max_ms` checked against the agent's own clock: the reference Realtime agent puts an injected pause
(`reply_pause_ms`) between the two sentences of its reply ("Of course. For how many people...?"), their silent
edges cut so the pause is exact, and notes the longest silence of the reply as it played on its clock (the wait
from the commit to its first voiced sample, or the pause); tamesu's `silence_gap_max_ms`, from VAD on the
recorded tracks, must agree within 20 ms for every pause and codec. Each call is made up to three times (again
only while none agrees) and the closest counts (as the other clock tests do): a loaded machine can hold either
loop at the moment a reply's audio arrives, and with two calls the closer one was 23 ms off once in three runs at
load 19 on 2 cores.

The calls are test_voice_clock.py's too (`agents.realtime_clock`: each also injects a delay, 800 ms with the
500 ms pause so that the wait is its longest silence, none with 2.5 and 4 s); each format and pause counts one
name's calls."""

from __future__ import annotations

import pytest

from agents.realtime_clock import PAUSE_FORMATS, PAUSES_MS, Clocked, not_yet_paused
from agents.voice import needs_voice

pytestmark = [needs_voice, pytest.mark.audio, pytest.mark.xdist_group("audio-clock"), pytest.mark.timeout(580)]


def test_silence_gap_agrees_with_the_agents_own_clock(realtime_clock: Clocked) -> None:
    # the pause was made, on the agent's clock, in one call at least (a loaded machine held the agent's own clock
    # up to 57 ms short of it in two CI runs: the guard is for the agent, tamesu is checked against what it noted;
    # a name is called again while none of its calls paused as told)
    assert not not_yet_paused(realtime_clock.calls, realtime_clock.gaps), realtime_clock.gaps
    differences = realtime_clock.silence()
    print("agent's own longest silence (ms):", realtime_clock.gaps)
    print("tamesu minus the agent's own clock (ms):", differences)
    assert set(differences) == {f"{fmt}_{pause}" for fmt in PAUSE_FORMATS for pause in PAUSES_MS}, differences
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences
