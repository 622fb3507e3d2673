"""`interruption_stop_ms` on the `sip` target checked against the SIP phone agent's own clock (examples/phone-agent
on baresip, clock.py): the persona talks over the agent's reply (`interrupt_probability: 1`), the agent hears the
caller's first frame with a sound and stops its reply `--stop-delay-ms` later, noting from that frame as it heard it
to the last frame of its reply with a sound as it went out. Each call is made up to three times (again only when it
did not agree) and the closest one counts (test_voice_clock.py says why).

Before, the persona never talked over a sip agent: `interrupt_probability` had no effect there, and no SIP call
recorded `interruption_stop_ms`. Measured: tamesu -5 to +45 ms off the agent in single calls, the closest of a
delay's calls -3 to +20 (load 5-20 on 2 cores): the barge-in starts when the caller's first frame with a sound left
the SIP worker (marked as it was handed over, 10-20 ms early), and the talked-over reply's audio is placed a 20 ms
frame at a time (a 100 ms chunk's arrival put its last sound up to 80 ms early). What is left over is PJSIP's
dating of the agent's frames (two chunks dated 0.2 ms apart were seen) and the agent's own 20 ms frames.

The lane is `audio-sip` (tests/conftest.py), with the other SIP tests: calls one at a time in real time."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agents import phone
from agents.voice import calls_one_at_a_time, not_yet_within
from agents.voice_bot import closest
from tamesu.audio.extra import problem as voice_problem

reason = phone.missing() or voice_problem()
STOPS_MS = (250, 700)
"""How long the agent goes on after hearing the caller: within the reply (about 3 s), which the persona talks over
0.3-1.2 s after its first speech."""
TEST = ('persona: { name: Ben, behaviors: { interrupt_probability: 1 } }, scenario: { script: [ '
        '{ say: "Can I book a table for two people?" }, { say: "Sorry, for three people please." } ] }')
pytestmark = [pytest.mark.audio, pytest.mark.skipif(reason is not None, reason=reason or ""),
              pytest.mark.xdist_group("audio-sip"), pytest.mark.timeout(580)]


def test_a_barge_ins_stop_agrees_with_the_phone_agents_own_clock(tamesu: Callable, tmp_path: Path) -> None:
    names = [f"stop_{delay}" for delay in STOPS_MS]
    # a short pause inside the reply: the agent is still talking when the caller starts, and until it stops
    agents = dict(zip(names, phone.start_all([
        ["--greeting", "Hello.", "--reply-delay-ms", "0", "--reply-pause-ms", "60", "--stop-delay-ms", str(delay),
         "--clock-file", str(tmp_path / f"stop_{delay}.jsonl")] for delay in STOPS_MS]), strict=True))
    try:
        # idle: the reply's one pause is 60 ms (agent's own file, played by baresip), so a second of silence ends a
        # turn (2 s made each call's greeting and last reply a second longer to wait out)
        targets = {name: f'{{ type: sip, to: "{agent.uri}", idle: 1s, turn_timeout: 30s, max_duration: 60s }}'
                   for name, agent in agents.items()}
        calls = calls_one_at_a_time(tamesu, tmp_path, targets=targets, test=TEST, repeat=3, timeout=560,
                                    again=lambda done: not_yet_within(_differences(tmp_path, done), 30))
    finally:
        for agent in agents.values():
            agent.stop()
    rows = [(name, _measured(result), own) for name, result, own in _with_notes(tmp_path, calls)]
    print("per call: tamesu's interruption_stop_ms, the agent's own stops (ms):", rows)
    for name, measured, own in rows:
        # one barge-in a call, over the first reply (the second is the last: nobody talks over it), and the
        # agent went on for as long as it was told before it stopped
        assert len(measured) == len(own) == 1, (name, measured, own)
        assert own[0] >= int(name.rsplit("_", 1)[1]) - 20, (name, own)
    differences = _differences(tmp_path, calls)
    print("interruption_stop_ms, tamesu minus the agent's clock (ms):", differences)
    assert len(differences) == len(STOPS_MS), differences
    assert not not_yet_within(differences, 30), differences


def _measured(result: dict) -> list[float]:
    return [t["agent"]["measures"]["interruption_stop_ms"] for t in result["turns"]
            if "interruption_stop_ms" in (t["agent"].get("measures") or {})]


def _with_notes(folder: Path, calls: list[tuple[str, dict]]) -> list[tuple[str, dict, list[float]]]:
    """Each call with the stops its agent noted in it (each delay has an agent of its own, which counts its calls
    from 1 in the order they ran)."""
    notes = {name: _notes(folder / f"{name}.jsonl") for name, _result in calls}
    seen: dict[str, int] = {}
    out = []
    for name, result in calls:
        k = seen[name] = seen.get(name, 0) + 1
        out.append((name, result, notes[name].get(k, [])))
    return out


def _differences(folder: Path, calls: list[tuple[str, dict]]) -> dict[str, list[float]]:
    """interruption_stop_ms, tamesu minus the agent, per delay (a call without one stop on both sides: none)."""
    rows = [(name, measured[0], own[0]) for name, result, own in _with_notes(folder, calls)
            if len(measured := _measured(result)) == len(own) == 1]
    found = closest(rows)
    return {name: found.get(name, []) for name, _result in calls}


def _notes(path: Path) -> dict[int, list[float]]:
    """The stops the agent noted per call, in order (each written again as it grows: the last is the stop)."""
    calls: dict[int, dict[int, float]] = {}
    for text in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        note = json.loads(text)
        if "stop_ms" in note:
            calls.setdefault(note["call"], {})[note["stop"]] = note["stop_ms"]
    return {call: [stops[k] for k in sorted(stops)] for call, stops in calls.items()}
