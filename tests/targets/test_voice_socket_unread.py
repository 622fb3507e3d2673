"""An audio-socket call transcribes during the call only the replies something reads then (a script's `wait_for`,
a capture): the others are transcribed once the call is over, with the rest, not against the CPU of an agent that
shares the machine. Against the `voice` target and the burst agent (tests/agents/burst_voice.py): its greeting
"Welcome to the bakery..." and its answer "We open at nine in the morning." Before, every reply was transcribed
as its turn ended, read or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents.voice import needs_voice
from conftest import run_tamesu

pytestmark = [pytest.mark.audio, needs_voice, pytest.mark.timeout(400)]

SUITE = """name: unread
targets:
  bakery: { type: voice, url: "{{env.BOT}}/burst", turn_timeout: 30s }
tests:
  - name: nothing reads
    target: bakery
    scenario: { script: [ { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: the wait reads the greeting
    target: bakery
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 120s }, { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: a capture reads both
    target: bakery
    capture: [ { name: hour, regex: "(?i)\\\\bat (\\\\w+)" } ]
    scenario: { script: [ { say: "When do you open?" } ] }
"""


def test_only_the_replies_read_during_the_call_are_transcribed_during_it(tmp_path: Path) -> None:
    from agents.burst_voice import BurstVoiceAgent

    agent = BurstVoiceAgent()
    (tmp_path / "unread.tamesu.yaml").write_text(SUITE)
    try:
        done = run_tamesu(["run", "--out", "out", "--parallel", "1"], cwd=tmp_path,
                          env={"BOT": agent.url, "TAMESU_STORE": "off"}, timeout=360)
    finally:
        agent.stop()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    results: dict[str, dict[str, Any]] = {}
    folders: dict[str, Path] = {}
    for path in (tmp_path / "out").rglob("result.json"):
        result = json.loads(path.read_text())
        results[result["test"]], folders[result["test"]] = result, path.parent
    during_after = {}
    for name, result in results.items():
        assert result["status"] == "passed", (name, result.get("error"), result["assertions"])
        (audio,) = [e["data"] for e in result["events"] if e["name"] == "audio"]
        during_after[name] = (audio["transcribed_during_call"], audio["transcribed_after_call"])
        greeting, answer = [t["agent"]["text"].lower() for t in result["turns"]]
        # every reply has its words, read during the call or not: the greeting's and the answer's
        assert "bakery" in greeting and "morning" in answer, (name, greeting, answer)
        transcript = json.loads((folders[name] / "transcript.json").read_text())
        heard = [line["heard"] for line in transcript["lines"] if line["role"] == "agent"]
        assert "bakery" in heard[0].lower() and "morning" in heard[1].lower(), (name, heard)
    assert during_after == {"nothing reads": (0, 2), "the wait reads the greeting": (1, 1),
                            "a capture reads both": (2, 0)}, during_after
    assert results["a capture reads both"]["captured"]["hour"].lower() == "nine", results["a capture reads both"]
