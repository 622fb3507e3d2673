"""`silence_gap_max_ms` checked against the agent's own clock: the reference Realtime agent puts an injected pause
(`reply_pause_ms`) between the two sentences of its reply ("Of course. For how many people...?"), their silent
edges cut so the pause is exact, and notes the longest silence of the reply as it played on its clock (the wait
from the commit to its first voiced sample, or the pause); tamesu's `silence_gap_max_ms`, from VAD on the
recorded tracks, must agree within 20 ms for every pause and codec. Each call is made up to three times (again
only while none agrees) and the closest counts (as the other clock tests do): a loaded machine can hold either
loop at the moment a reply's audio arrives, and with two calls the closer one was 23 ms off once in three runs at
load 19 on 2 cores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from agents.voice import calls_on_the_agents_clock, needs_voice, not_yet_within

# the longest silence is the pause only when it is longer than the wait for the reply (2-3.5 s on a loaded
# 2-core machine, the agent's Whisper hearing the caller): whichever is longer, the agent's clock has it
PAUSES_MS = (1500, 3500, 5000)
# G.711 was 19-27 ms long over a 3.5-5 s pause: the second sentence's soft "F" starts 65-90 ms before VAD's
# window and the edge was looked for only 64 ms back (test_metric_edges.py now follows it)
FORMATS = ("pcm16", "g711_ulaw")
pytestmark = [needs_voice, pytest.mark.audio, pytest.mark.xdist_group("audio-clock"), pytest.mark.timeout(580)]


def _differences(module: ModuleType, calls: list[tuple[str, dict]]) -> dict[str, list[float]]:
    """tamesu's longest silence minus the agent's own, per target, in call order."""
    assert len(calls) == len(module.GAPS), module.GAPS
    differences: dict[str, list[float]] = {}
    for (name, result), own in zip(calls, module.GAPS, strict=True):
        differences.setdefault(name, []).append(round(result["metrics"]["silence_gap_max_ms"] - own, 1))
    return differences


def test_silence_gap_agrees_with_the_agents_own_clock(tamesu: Callable, tmp_path: Path) -> None:
    module, calls = calls_on_the_agents_clock(
        tamesu, tmp_path, knob="reply_pause_ms", values=PAUSES_MS, formats=FORMATS, repeat=3,
        test='scenario: { script: [ { say: "I would like to book a table" } ] }', notes=["GAPS"], timeout=560,
        again=lambda module, calls: not_yet_within(_differences(module, calls), 20))
    for (name, _result), own in zip(calls, module.GAPS, strict=True):
        assert own >= int(name.rsplit("_", 1)[1]) - 1, (name, own)  # the pause was made, on the agent's clock
    differences = _differences(module, calls)
    print("agent's own longest silence (ms):", module.GAPS)
    print("tamesu minus the agent's own clock (ms):", differences)
    assert set(differences) == {f"{fmt}_{pause}" for fmt in FORMATS for pause in PAUSES_MS}, differences
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences
