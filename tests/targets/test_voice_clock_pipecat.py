"""`time_to_first_audio_ms` on the pipecat target checked against the pipecat bot's own clock: the bot
(examples/voice-bot) holds each reply an injected `?reply_delay_ms=` longer and notes, where frames meet its
websocket (clock.py), the ms from the caller's last voiced audio frame as it arrived to the first audio frame of
its reply as it went out; tamesu's value (its last frame of the utterance sent to the reply's first audio on the
playback clock) must agree within 20 ms for every delay. Each call is made twice and the closer one counts, as
in test_voice_clock.py: a loaded machine can hold either process at the moment the reply's audio goes out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.voice_bot import needs_bot, voice_bot

# the first call also waits for the bot to build its first pipeline (Whisper, Piper), 30 s and more on a loaded
# machine: turn_timeout leaves room for it
DELAYS_MS = (0, 500, 1000)
pytestmark = [needs_bot, pytest.mark.audio, pytest.mark.xdist_group("audio-bot"), pytest.mark.timeout(580)]


def test_time_to_first_audio_agrees_with_the_pipecat_bots_own_clock(tamesu: Callable, tmp_path: Path) -> None:
    clock = tmp_path / "clock.jsonl"
    out = tmp_path / "out"
    with voice_bot("--clock-file", str(clock)) as base:
        targets, tests = [], []
        for delay in DELAYS_MS:
            name = f"delay_{delay}"
            targets.append(f'  {name}: {{ type: pipecat, url: "{base}/pipecat?reply_delay_ms={delay}&call={name}", '
                           "mode: audio, sample_rate: 16000, idle: 2s, turn_timeout: 90s }")
            tests.append(f"  - {{ name: {name}, target: {name}, repeat: 2, scenario: {{ script: [ "
                         '{ wait_for: "press|billing" }, { say: "Can I book a table for two people?" } ] } }')
        suite = tmp_path / "clock.tamesu.yaml"
        suite.write_text("targets:\n" + "\n".join(targets) + "\ntests:\n" + "\n".join(tests) + "\n",
                         encoding="utf-8")
        # one call at a time: the bot's notes are read in the order the calls ran
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "1"], cwd=tmp_path,
                      env={"HF_HUB_OFFLINE": "1"}, timeout=560)
    assert done.returncode == 0, done.stdout + done.stderr
    own: dict[str, list[float]] = {}
    for line in clock.read_text(encoding="utf-8").splitlines():
        note = json.loads(line)
        own.setdefault(note["call"], []).append(note["first_audio_ms"])
    runs = []
    for path in out.rglob("result.json"):
        result = json.loads(path.read_text())
        measured = [t["agent"]["measures"]["time_to_first_audio_ms"] for t in result["turns"]
                    if "time_to_first_audio_ms" in (t["agent"].get("measures") or {})]
        runs.append((result["started_at"], result["test"], measured))
    differences: dict[str, list[float]] = {}
    measured_by_name: dict[str, list[float]] = {}
    for _start, name, measured in sorted(runs):
        assert len(measured) == 1, (name, measured)  # the reply to the caller; the greeting has no user turn
        measured_by_name.setdefault(name, []).append(measured[0])
    assert sorted(own) == sorted(measured_by_name), (own, measured_by_name)
    for name, values in measured_by_name.items():
        assert len(own[name]) == len(values) == 2, (name, own[name], values)
        differences[name] = [round(m - o, 1) for m, o in zip(values, own[name], strict=True)]
        delay = int(name.rsplit("_", 1)[1])
        assert min(own[name]) >= delay, (name, own[name])  # the bot waited as told, on its clock
    print("the bot's own time to first audio (ms):", own)
    print("tamesu minus the bot's own clock (ms):", differences)
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences
