"""The pipecat bot keeps the caller's whole sentence on a loaded machine. Its VAD ran in the user aggregator,
after Whisper's segmenter, and its start and stop travelled back upstream: late under load, the segmenter
(keeping 1 s while no one speaks) had dropped the start or the middle of the sentence ("in o'clock please." for
"I would like to book a table ... at seven o'clock please", 2 calls of 4 at load 21-25 on 2 cores). Now its VAD
runs right after the input, in order with the audio, and waits 0.5 s of silence (pipecat's 0.2 s cut a slow
caller's sentence at each full stop). A slow caller (0.7x: pauses of 300 and 400 ms between the parts) says a
long sentence on three calls at once; the bot's own transcript of the user must hold every part."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.voice_bot import needs_bot
from tamesu.speech.words import spoken

SENTENCE = "I would like to book a table for four people. On Friday evening, at seven o'clock please."
# a word of each part, as Whisper tiny in the bot hears them every time ("four" may come back as "for" or "4")
PARTS = ("would", "book", "table", "people", "friday", "evening", "seven", "please")
CALLS = 3
pytestmark = [needs_bot, pytest.mark.audio, pytest.mark.timeout(580)]


def test_the_bot_hears_a_slow_callers_whole_sentence_on_calls_at_once(tamesu: Callable, tmp_path: Path,
                                                                       voice_bot_url: str) -> None:
    suite = tmp_path / "sentence.tamesu.yaml"
    suite.write_text(f"""targets:
  bot: {{ type: pipecat, url: "{voice_bot_url}/pipecat", mode: audio, sample_rate: 16000, idle: 2s,
         turn_timeout: 90s }}
tests:
  - name: slow caller
    target: bot
    repeat: {CALLS}
    persona: {{ behaviors: {{ speaking_rate: 0.7 }} }}
    scenario: {{ script: [ {{ wait_for: "press|billing", timeout: 40s }}, {{ say: "{SENTENCE}" }} ] }}
""", encoding="utf-8")
    out = tmp_path / "out"
    done = tamesu(["run", str(suite), "--out", str(out), "--parallel", str(CALLS)], cwd=tmp_path,
                  env={"HF_HUB_OFFLINE": "1"}, timeout=560)
    assert done.returncode == 0, done.stdout + done.stderr
    heard = []
    for path in sorted(out.rglob("result.json")):
        turn = json.loads(path.read_text())["turns"][-1]
        heard.append(((turn.get("agent") or {}).get("audio") or {}).get("agent_heard_user") or "")
    assert len(heard) == CALLS, heard
    print("the bot heard:", heard)
    # the bot's transcript comes over RTVI (`user-input`); on a loaded machine one call of three once got none of
    # the bot's RTVI messages after `user-started-speaking` although the bot answered: no transcript is no
    # evidence either way, a transcript missing a part is the failure
    reported = [text for text in heard if text.strip()]
    assert len(reported) >= CALLS - 1, heard
    # read as tamesu reads speech: Whisper writes "seven o'clock" as "7 o'clock" in some calls
    missing = {text: [w for w in PARTS if spoken(w) not in spoken(text).split()] for text in reported}
    assert not any(missing.values()), missing
