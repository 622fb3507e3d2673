"""A `wait_for` on an audio call ends with its timeout, the transcription of what it heard too: the agent's speech
heard but not transcribed by then is said (a `transcription_cut` event, the step's line: not decided, exit 3, the
phrase may be in it), and is in the
record's `heard` once transcribed after the call. Against a SIP call to the baresip phone agent, and the `voice`
target and the burst agent
(tests/agents/burst_voice.py), whose greeting is 3 s of speech in one message: heard on the playback clock, it
ends after a 2 s wait's timeout, however fast the machine. Before, the wait went on as long as the transcription
took (a 45 s wait ended at 82 s at load 33, its greeting queued behind other calls' transcriptions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents import phone
from agents.voice import needs_voice
from conftest import run_tamesu

pytestmark = [pytest.mark.audio, needs_voice, pytest.mark.timeout(300)]

SUITE = """name: waits
targets:
  greets: { type: voice, url: "{{env.BOT}}/burst", turn_timeout: 20s }
  quiet_first: { type: voice, url: "{{env.BOT}}/burst", greeting: false, turn_timeout: 20s }
tests:
  - name: in the greeting
    target: greets
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 2s }, { say: "When do you open?" } ] }
  - name: listening on
    target: quiet_first
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 2s }, { say: "When do you open?" } ] }
  - name: time enough
    target: greets
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 60s }, { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
"""


def test_a_wait_ends_with_its_timeout_and_says_what_it_heard_but_did_not_transcribe(tmp_path: Path) -> None:
    from agents.burst_voice import BurstVoiceAgent

    agent = BurstVoiceAgent()
    (tmp_path / "waits.tamesu.yaml").write_text(SUITE)
    try:
        done = run_tamesu(["run", "--out", "out", "--parallel", "3"], cwd=tmp_path,
                          env={"BOT": agent.url, "TAMESU_STORE": "off"}, timeout=240)
    finally:
        agent.stop()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    results: dict[str, dict[str, Any]] = {}
    for path in (tmp_path / "out").rglob("result.json"):
        result = json.loads(path.read_text())
        results[result["test"]] = result
    assert results["time enough"]["status"] == "passed", results["time enough"]["assertions"]
    for name in ("in the greeting", "listening on"):
        result = results[name]
        # not decided: the phrase may be in the speech not transcribed (the environment's, exit 3; not the agent's)
        assert (result["status"], result["fault"]) == ("error", "environment"), \
            (name, [t["agent"]["text"] for t in result["turns"]])
        reason = result["error"]
        # the greeting is 3 s of speech, heard out on the playback clock: past the 2 s wait, nothing of it was
        # transcribed by then; no turn was said (the step after the wait never came)
        assert reason.startswith("script step 1 waited 2s for 'welcome to the bakery'; the agent said nothing ("), \
            reason
        assert reason.endswith("s of its speech was heard but not transcribed by then): not decided, the phrase may "
                               "be in what was not transcribed (tamesu's speech-to-text was behind: a loaded "
                               "machine? a longer timeout gives it time)"), reason
        (event,) = [e for e in result["events"] if e["name"] == "transcription_cut"]
        cut = event["data"]
        assert 1500 <= cut["heard_ms"] <= 5000, cut
        assert f"({cut['heard_ms'] / 1000:.1f}s of its speech" in reason, (reason, cut)
        (greeting,) = [t["agent"] for t in result["turns"]]
        assert greeting["text"] == "" and greeting["audio"]["untranscribed_ms"] == cut["heard_ms"], greeting
        # the record still has the words: transcribed once the call was over, for the transcript's `heard`
        assert "bakery" in (greeting["audio"]["agent_said"] or "").lower(), greeting["audio"]
        # the wait ended with its timeout and the utterance it had begun (3 s, then 1 s of quiet: idle), not
        # after a transcription
        assert event["at_ms"] - greeting["sent_at_ms"] < 2000 + 4000 + 1500, (event, greeting["sent_at_ms"])
    assert ("2 agent utterances heard but not transcribed in time (a wait_for's, or turn_timeout after they were "
            "heard out)") in done.stdout, \
        done.stdout


@pytest.mark.skipif(phone.missing() is not None, reason=phone.missing() or "")
def test_a_wait_on_a_sip_call_ends_with_its_timeout_too(tmp_path: Path) -> None:
    # the phone agent's greeting's first utterance (2 s of speech, then the idle second that ends it) is heard out
    # past a 2 s wait: before, it was transcribed however long that took, and the wait passed or failed after it
    (agent,) = phone.start_all([["--greeting", "Thank you for calling the clinic.|Press 2 for billing.",
                                 "--pause-s", "2"]])
    try:
        (tmp_path / "sip.tamesu.yaml").write_text(f"""name: sip
targets:
  clinic: {{ type: sip, to: "{agent.uri}", ring_timeout: 5s, idle: 1s, turn_timeout: 15s, max_duration: 60s }}
tests:
  - name: short wait
    target: clinic
    scenario: {{ script: [ {{ wait_for: "thank you for calling the clinic", timeout: 2s }} ] }}
""")
        done = run_tamesu(["run", "--out", "out"], cwd=tmp_path, env={"TAMESU_STORE": "off", "HF_HUB_OFFLINE": "1"},
                          timeout=150)
    finally:
        agent.stop()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert (result["status"], result["fault"]) == ("error", "environment"), \
        [t["agent"]["text"] for t in result["turns"]]
    reason = result["error"]
    assert reason.startswith("script step 1 waited 2s for 'thank you for calling the clinic'; the agent said "
                             "nothing ("), reason
    (cut,) = [e["data"] for e in result["events"] if e["name"] == "transcription_cut"]
    greeting = result["turns"][0]["agent"]
    assert greeting["text"] == "" and greeting["audio"]["untranscribed_ms"] == cut["heard_ms"] > 1000, greeting
    assert "clinic" in (greeting["audio"]["agent_said"] or "").lower(), greeting["audio"]  # heard after the call
