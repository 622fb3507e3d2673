"""A noisy caller on the `sip` target: with background noise `between` (the `noisy_cafe` pack), the line
carries the noise between the caller's utterances too, through its pause before it speaks, and the agent
hears it: the example IVR on baresip writes what it heard of the call (`--heard`, baresip's sndfile filter)."""

from __future__ import annotations

import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from agents import phone
from tamesu.audio.extra import problem as voice_problem

reason = phone.missing() or voice_problem()
pytestmark = [pytest.mark.audio, pytest.mark.xdist_group("audio-sip"),  # the SIP lane (tests/conftest.py)
              pytest.mark.skipif(reason is not None, reason=reason or ""),
              pytest.mark.timeout(240)]


def _db(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if samples.size else 0.0
    return 20 * np.log10(max(rms, 1e-3) / 32768)


def test_the_agent_hears_the_noise_between_a_noisy_callers_words(tamesu: Callable, tmp_path: Path) -> None:
    from tamesu.audio import vad
    from tamesu.audio.clip import Clip

    heard = tmp_path / "heard"
    heard.mkdir()
    # the menu comes 6 s after the welcome: the caller speaks in between, then waits for it with its line open
    agent = phone.start("--greeting", "Welcome to Acme.|Press 2 for billing.", "--pause-s", "6",
                        "--heard", str(heard))
    try:
        suite = tmp_path / "noisy.tamesu.yaml"
        suite.write_text(f"""
targets:
  ivr: {{ type: sip, to: "{agent.uri}", idle: 1s, turn_timeout: 20s, max_duration: 60s }}
tests:
  - name: noisy caller
    target: ivr
    persona: {{ behaviors: noisy_cafe }}
    scenario: {{ script: [ {{ say: "Hello, I am calling about my bill" }}, {{ dtmf: "2" }} ] }}
    assert: [ {{ contains: balance }} ]
""", encoding="utf-8")
        out = tmp_path / "out"
        done = tamesu(["run", str(suite), "--out", str(out)], cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"},
                      timeout=200)
    finally:
        agent.stop()  # baresip closes the call's files
    assert done.returncode == 0, done.stdout + done.stderr
    [dump] = heard.glob("dump-*-dec.wav")
    with wave.open(str(dump)) as wav:
        rate = wav.getframerate()
        track = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    speech = vad.segments(Clip(track, rate))
    # what the agent heard: the caller's one utterance (VAD may split it at its comma), noise on either side
    assert speech, "the agent heard no speech"
    start, end = speech[0][0], speech[-1][1]
    assert end - start > 800, speech  # the 2 s line, less its silent edges (and what a loaded line drops)

    def window(from_ms: float, to_ms: float) -> np.ndarray:
        return track[int(from_ms * rate / 1000):int(to_ms * rate / 1000)]

    # before: the persona's pause (300-900 ms), kept 200 ms clear of a soft onset VAD places late
    after, before = window(end + 300, end + 2300), window(start - 500, start - 200)
    for part in (after, before):  # noise at the pack's level under the voice, not silence, and not speech
        assert -45 < _db(part) < -20, (_db(part), speech)
        assert vad.segments(Clip(part, rate)) == []
