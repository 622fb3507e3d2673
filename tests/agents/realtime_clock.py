"""The calls that test_voice_clock.py (time to first audio) and test_voice_clock_gaps.py (the longest silence)
share: the reference Realtime agent notes both on its own clock for every reply (`TIMINGS`, `GAPS`), so a call
that injects a delay and a pause serves both tests. Eight calls instead of six and six (the two tests took
105-126 s of the clock lane's 208 at load 4-10: each call listens to the whole reply in real time, and each
test's first call waits for its run's speech workers). The session fixture `realtime_clock` makes them once.

Each name's first audio counts for its one format and delay, its silence for its one format and pause: no
value takes the closest of more calls than before (up to three, again only while none of them agrees)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from agents.voice import calls_with_knobs, not_yet_within

DELAYS_MS = (0, 800)
DELAY_FORMATS = ("pcm16", "g711_ulaw", "g711_alaw")
# the longest silence is the pause only when it is longer than the wait for the reply (the agent's commit to its
# first voiced sample: tens of ms, and the delay; it hears what it is told to, `HEARD`): whichever is longer, the
# agent's clock has it. 2.5 and 4 s come without the delay (checked as pauses), 500 ms with it (the wait); each
# call lasts its reply, pause included (the turn ends with the agent's response.done)
PAUSES_MS = (500, 2500, 4000)
# G.711 was 19-27 ms long over a 3.5-5 s pause: the second sentence's soft "F" starts 65-90 ms before VAD's
# window and the edge was looked for only 64 ms back (test_metric_edges.py now follows it)
PAUSE_FORMATS = ("pcm16", "g711_ulaw")
CALLS = {f"{fmt}_d{delay}_p{pause}": (fmt, delay, pause)
         for fmt in DELAY_FORMATS
         for delay, pause in (((0, 2500), (800, 500), (0, 4000)) if fmt in PAUSE_FORMATS else ((0, 0), (800, 0)))}
"""name: (audio format, reply_delay_ms, reply_pause_ms)."""
FIRST_AUDIO = {f"{fmt}_{delay}": next(name for name, call in CALLS.items() if call[:2] == (fmt, delay))
               for fmt in DELAY_FORMATS for delay in DELAYS_MS}
"""What test_voice_clock.py checks (FORMAT_DELAY): the one name whose first audio counts for it."""
SILENCE = {f"{fmt}_{pause}": next(name for name, call in CALLS.items() if (call[0], call[2]) == (fmt, pause))
           for fmt in PAUSE_FORMATS for pause in PAUSES_MS}
"""What test_voice_clock_gaps.py checks (FORMAT_PAUSE): the one name whose longest silence counts for it."""
SCRIPT = 'scenario: { script: [ { say: "I would like to book a table" } ] }'
HEARD = "I would like to book a table"
"""What the agent takes the caller to say (`?heard=`) instead of transcribing it: its Whisper was the wait for
every reply, 1-1.6 s at load 4-10 and 2-3.5 s at load 15-25, 8 calls a session, and none of it is measured here
that the agent's clock does not time from the commit on anyway."""
"""A table, not the menu: the agent's menu is 15 s of speech that every call listened to in real time."""


@dataclass(frozen=True)
class Clocked:
    """Each call (test name, result.json) in the order they ran, and what the agent noted of each reply then."""

    calls: list[tuple[str, dict]]
    timings: list[float]
    """The agent's commit to first audio (ms), one per call."""
    gaps: list[float]
    """The agent's longest silence of the reply (ms), one per call."""

    def first_audio(self) -> dict[str, list[float]]:
        """tamesu's time to first audio minus the agent's, per FORMAT_DELAY, in call order."""
        return _by(FIRST_AUDIO, _first_audio(self.calls, self.timings))

    def silence(self) -> dict[str, list[float]]:
        """tamesu's silence_gap_max_ms minus the agent's longest silence, per FORMAT_PAUSE, in call order."""
        return _by(SILENCE, _silence(self.calls, self.gaps))


def _first_audio(calls: list[tuple[str, dict]], timings: list[float]) -> dict[str, list[float]]:
    assert len(calls) == len(timings), timings
    differences: dict[str, list[float]] = {}
    for (name, result), own in zip(calls, timings, strict=True):
        measured = result["turns"][0]["agent"]["measures"]["time_to_first_audio_ms"]
        differences.setdefault(name, []).append(round(measured - own, 1))
    return differences


def _silence(calls: list[tuple[str, dict]], gaps: list[float]) -> dict[str, list[float]]:
    assert len(calls) == len(gaps), gaps
    differences: dict[str, list[float]] = {}
    for (name, result), own in zip(calls, gaps, strict=True):
        differences.setdefault(name, []).append(round(float(result["metrics"]["silence_gap_max_ms"]) - own, 1))
    return differences


def _by(keys: dict[str, str], by_name: dict[str, list[float]]) -> dict[str, list[float]]:
    return {key: by_name[name] for key, name in keys.items() if name in by_name}


def _again(module: ModuleType, calls: list[tuple[str, dict]]) -> set[str]:
    """The names one of whose values has no call within 20 ms of the agent's clock yet."""
    first = {name: found for name, found in _first_audio(calls, module.TIMINGS).items()
             if name in FIRST_AUDIO.values()}
    silence = {name: found for name, found in _silence(calls, module.GAPS).items() if name in SILENCE.values()}
    return {*not_yet_within(first, 20), *not_yet_within(silence, 20), *not_yet_paused(calls, module.GAPS)}


def not_yet_paused(calls: list[tuple[str, dict]], gaps: list[float]) -> list[str]:
    """The names whose longest silence counts (`SILENCE`) none of whose calls the agent noted pausing as told
    (within 60 ms: a loaded machine has held its own clock up to 57 ms short of the pause it made)."""
    paused: dict[str, bool] = {}
    for (name, _result), own in zip(calls, gaps, strict=True):
        if name in SILENCE.values():
            paused[name] = paused.get(name, False) or own >= CALLS[name][2] - 60
    return [name for name, done in paused.items() if not done]


def clocked_calls(tamesu: Callable, tmp_path: Path) -> Clocked:
    """Every name of `CALLS` called, up to three times while `_again` names it; the agent's notes copied at
    the end (other tests' calls add to them)."""
    module, calls = calls_with_knobs(
        tamesu, tmp_path, targets={name: (fmt, {"reply_delay_ms": delay, "reply_pause_ms": pause, "heard": HEARD})
                                   for name, (fmt, delay, pause) in CALLS.items()},
        repeat=3, test=SCRIPT, notes=["TIMINGS", "GAPS"], timeout=560, again=_again)
    return Clocked(calls, list(module.TIMINGS), list(module.GAPS))
