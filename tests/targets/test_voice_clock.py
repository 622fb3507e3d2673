"""Metrics checked against the agent's own clock: the reference Realtime agent waits an injected
`reply_delay_ms` before it answers and notes, on its clock, how long it took from the commit of the caller's
audio to its first audio; tamesu's `time_to_first_audio_ms` must agree within 20 ms, for every delay and
codec. Each call is made twice and the closer one counts: another process on a loaded machine can hold
this one's event loop for tens of ms at the moment the first audio arrives (seen once: 44 ms)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.voice import agent_module, needs_voice

DELAYS_MS = (0, 800)
FORMATS = ("pcm16", "g711_ulaw", "g711_alaw")
pytestmark = [needs_voice, pytest.mark.audio, pytest.mark.timeout(400)]


def test_time_to_first_audio_agrees_with_the_agents_own_clock(tamesu: Callable, tmp_path: Path) -> None:
    from tamesu.audio import stt, tts

    module = agent_module()
    tts.preload()
    stt.model()
    agent = module.ThreadAgent()
    module.TIMINGS.clear()
    try:
        targets, tests = [], []
        for fmt in FORMATS:
            for delay in DELAYS_MS:
                name = f"{fmt}_{delay}"
                targets.append(f'  {name}: {{ type: realtime, url: "{agent.url}?reply_delay_ms={delay}", '
                               f"mode: audio, audio_format: {fmt}, turn_detection: commit }}")
                tests.append(f"  - {{ name: {name}, target: {name}, repeat: 2, scenario: {{ script: [ {{ say: "
                             f'"Can I see the menu" }} ] }} }}')
        suite = tmp_path / "clock.tamesu.yaml"
        suite.write_text("targets:\n" + "\n".join(targets) + "\ntests:\n" + "\n".join(tests) + "\n",
                         encoding="utf-8")
        out = tmp_path / "out"
        # one call at a time: the agent's clock list is read in the order the calls ran
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "1"], cwd=tmp_path,
                      env={"HF_HUB_OFFLINE": "1"}, timeout=380)
    finally:
        agent.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    runs = []
    for path in out.rglob("result.json"):
        result = json.loads(path.read_text())
        runs.append((result["started_at"], result["test"], result["turns"][0]["agent"]["measures"]))
    ordered = sorted(runs)
    assert len(ordered) == 2 * len(FORMATS) * len(DELAYS_MS) == len(module.TIMINGS), module.TIMINGS
    differences: dict[str, list[float]] = {}
    for (_start, name, measures), own in zip(ordered, module.TIMINGS, strict=True):
        differences.setdefault(name, []).append(round(measures["time_to_first_audio_ms"] - own, 1))
    print("tamesu minus the agent's own clock (ms):", differences)
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences
    # the injected delay is inside what was measured (the agent's own hearing and speech vary from call to
    # call on a loaded machine, so calls are compared with the agent's clock, not with each other)
    for _start, name, measures in ordered:
        assert measures["time_to_first_audio_ms"] >= int(name.rsplit("_", 1)[1]), (name, measures)
