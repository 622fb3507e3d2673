"""A `wait_for` on an audio call ends with its timeout, the transcription of what it heard too: the agent's speech
heard but not transcribed by then is said (a `transcription_cut` event, the step's line: not decided, exit 3, the
phrase may be in it), and is in the record's `heard` once transcribed after the call. Against a SIP call to the
baresip phone agent; the `voice` target's case is a call of test_voice_burst.py's run (its agent's greeting is
3 s of speech in one message). Before, the wait went on as long as the transcription took (a 45 s wait ended at
82 s at load 33, its greeting queued behind other calls' transcriptions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents import phone
from agents.voice import needs_voice
from conftest import run_tamesu

pytestmark = [pytest.mark.audio, needs_voice, pytest.mark.timeout(300)]


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
    assert reason.startswith('script step 1 waited 2s for "thank you for calling the clinic"; the agent said '
                             "nothing ("), reason
    (cut,) = [e["data"] for e in result["events"] if e["name"] == "transcription_cut"]
    greeting = result["turns"][0]["agent"]
    assert greeting["text"] == "" and greeting["audio"]["untranscribed_ms"] == cut["heard_ms"] > 1000, greeting
    assert "clinic" in (greeting["audio"]["agent_said"] or "").lower(), greeting["audio"]  # heard after the call
