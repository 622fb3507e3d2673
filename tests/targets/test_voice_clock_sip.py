"""`time_to_first_audio_ms` on the `sip` target checked against the SIP phone agent's own clock
(examples/phone-agent on baresip, clock.py: where frames meet baresip's codec, read from its sndfile filter as
each 20 ms frame is written): the agent answers the caller's speech after an injected `--reply-delay-ms`, with
exactly `--reply-pause-ms` of silence between the two sentences of its reply, and notes from the caller's last
voiced frame as it heard it (baresip's jitter buffer off) to its reply's first voiced sample as it went out, and
the reply's longest silence. Each call is made up to three times (again only when it did not agree) and the closest
one counts (test_voice_clock.py says why).

Asserted: one reply per call, the agent waited as told (and paused as told in one call at least: a name is called
again while it has not), and tamesu's time to first audio within 20 ms of the agent's (the closest of up to three
calls). Measured: tamesu 1-9 ms over the agent, every single call (load
1-7, one run with two busy loops): the caller's last frame reaches the agent 1-4 ms after it leaves the SIP
worker, and the newest RTP packet is seen within the 2 ms the worker watches it at. It was 52-85 ms: PJSIP's
conference bridge ran at its default 16 kHz and resampled the 8 kHz call both ways, holding each direction a
frame (~20 ms out, 20-30 ms in: now 8 kHz); the jitter buffer held the reply 10-70 ms more and PJSIP's media
clock takes it once a 20 ms tick (each received frame is now dated back by PJSIP's figures: the audio the
buffer still holds behind it, and how long ago the newest packet came in: targets/sip/_held.py); and a reply
whose first sound came at the end of a 100 ms chunk started a chunk later (a rising sound now starts a chunk).
Before that (83-460 ms): the caller's words end when their last frame leaves the worker (a `mark`), not when
handed over to it, where a loaded machine's late frames queue; a reply starts at its first loud sample in its
chunk; a SIP chunk plays as it arrives.
`silence_gap_max_ms` is not compared: on a SIP call the caller waits out `idle` after the greeting, a longer
silence than the reply's pause.

The lane is `audio-sip` (tests/conftest.py), with the other SIP tests: calls one at a time in real time; its
baresip agents are small, and no pipecat bot shares the lane."""

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
# (delay, pause): the pause is longer than the wait for the reply (the agent's 600 ms end of speech, the delay)
VALUES_MS = ((0, 1200), (400, 1600), (900, 2000))
SCRIPT = 'scenario: { script: [ { say: "Can I book a table for two people?" } ] }'
pytestmark = [pytest.mark.audio, pytest.mark.skipif(reason is not None, reason=reason or ""),
              pytest.mark.xdist_group("audio-sip"), pytest.mark.timeout(580)]


def test_time_to_first_audio_and_silence_agree_with_the_phone_agents_own_clock(tamesu: Callable,
                                                                                tmp_path: Path) -> None:
    # the first speaks the prompts they share into the cache, the others start side by side (phone.start_all)
    names = [f"delay_{delay}" for delay, _pause in VALUES_MS]
    agents = dict(zip(names, phone.start_all([
        ["--greeting", "Hello.", "--reply-delay-ms", str(delay), "--reply-pause-ms", str(pause),
         "--clock-file", str(tmp_path / f"delay_{delay}.jsonl"), "--hang-up-after-reply"]
        for delay, pause in VALUES_MS]), strict=True))
    try:
        # idle above the pause (1 s over the longest): the silence inside the reply is no end of the agent's turn;
        # each call waits it out after the greeting (the agent hangs up half a second after its reply)
        targets = {name: f'{{ type: sip, to: "{agent.uri}", idle: 3s, turn_timeout: 30s, max_duration: 60s }}'
                   for name, agent in agents.items()}
        calls = calls_one_at_a_time(tamesu, tmp_path, targets=targets, test=SCRIPT, repeat=3, timeout=560,
                                    again=lambda done: {*not_yet_within(_first_differences(tmp_path, done), 20),
                                                        *_not_yet_paused(tmp_path, done)})
    finally:
        for agent in agents.values():
            agent.stop()
    first, silence, rows = [], [], []
    for name, result, own in _with_notes(tmp_path, calls):
        measured = _measured(result)
        rows.append((name, measured, own, result["metrics"].get("silence_gap_max_ms")))
        assert len(measured) == len(own["first_audio_ms"]) == len(own["silence_ms"]) == 1, rows[-1]
        assert own["first_audio_ms"][0] >= int(name.rsplit("_", 1)[1]), rows[-1]  # the agent waited as told
        first.append((name, measured[0], own["first_audio_ms"][0]))
        # printed, not compared (below); absent once at load 18 (a KeyError then failed the test on a value it
        # never checks: metrics.py leaves it out when no user turn has its end placed)
        if (gap := result["metrics"].get("silence_gap_max_ms")) is not None:
            silence.append((name, gap, own["silence_ms"][0]))
    print("per call: tamesu's time to first audio, the agent's notes, tamesu's silence gap (ms):", rows)
    first_differences, silence_differences = closest(first), closest(silence)
    print("time to first audio, tamesu minus the agent's clock (ms):", first_differences)
    print("longest silence, tamesu minus the agent's clock (ms):", silence_differences)
    assert len(first_differences) == len(VALUES_MS), first_differences
    # the reply's pause as the agent made it (tamesu's silence_gap_max_ms is not compared here: on a SIP call
    # it is the caller's own wait of `idle` after the greeting, a longer silence than any pause in the reply)
    assert not _not_yet_paused(tmp_path, calls), silence  # the agent paused as told (in one of its calls at least)
    offsets = [min(both, key=abs) for both in first_differences.values()]
    # seen: 1-9 ms (the caller's last frame reaching the agent, the 2 ms watch of the newest packet)
    assert all(abs(offset) <= 20 for offset in offsets), first_differences


def _measured(result: dict) -> list[float]:
    return [t["agent"]["measures"]["time_to_first_audio_ms"] for t in result["turns"]
            if "time_to_first_audio_ms" in (t["agent"].get("measures") or {})]


def _with_notes(folder: Path, calls: list[tuple[str, dict]]) -> list[tuple[str, dict, dict[str, list[float]]]]:
    """Each call with what its agent noted of it (each delay has an agent of its own, which counts its calls
    from 1 in the order they ran)."""
    notes = {name: _notes(folder / f"{name}.jsonl") for name, _result in calls}
    seen: dict[str, int] = {}
    out = []
    for name, result in calls:
        k = seen[name] = seen.get(name, 0) + 1
        out.append((name, result, notes[name].get(k, {"first_audio_ms": [], "silence_ms": []})))
    return out


def _first_differences(folder: Path, calls: list[tuple[str, dict]]) -> dict[str, list[float]]:
    """Time to first audio, tamesu minus the agent, per delay (a call not noted as one reply: no difference)."""
    rows = [(name, _measured(result)[0], own["first_audio_ms"][0]) for name, result, own in _with_notes(folder, calls)
            if len(_measured(result)) == len(own["first_audio_ms"]) == 1]
    found = closest(rows)
    return {name: found.get(name, []) for name, _result in calls}


def _not_yet_paused(folder: Path, calls: list[tuple[str, dict]]) -> list[str]:
    """The names none of whose calls the agent noted pausing as told (within 20 ms): a loaded machine can hold
    baresip's file source mid-pause, and the frames it then sends at once shorten the pause on the wire (seen: a
    1,600 ms pause noted as 1,505 ms at CI's load while the time to first audio agreed within 7 ms)."""
    pauses = dict(VALUES_MS)
    paused: dict[str, bool] = {}
    for name, _result, own in _with_notes(folder, calls):
        told = pauses[int(name.rsplit("_", 1)[1])]
        paused[name] = paused.get(name, False) or any(silence >= told - 20 for silence in own["silence_ms"][:1])
    return [name for name, done in paused.items() if not done]


def _notes(path: Path) -> dict[int, dict[str, list[float]]]:
    """What the agent noted per call: `first_audio_ms` and `silence_ms` (each reply's longest), in reply order."""
    calls: dict[int, dict[str, list[float]]] = {}
    for text in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        note = json.loads(text)
        own = calls.setdefault(note["call"], {"first_audio_ms": [], "silence_ms": []})
        if "first_audio_ms" in note:
            own["first_audio_ms"].append(note["first_audio_ms"])
        else:  # written again as it grows: the last of a reply is its longest
            del own["silence_ms"][note["reply"] - 1:]
            own["silence_ms"].append(note["silence_ms"])
    return calls
