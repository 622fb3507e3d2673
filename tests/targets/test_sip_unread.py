"""A SIP call transcribes during the call only the replies something reads then (a script's `wait_for`): the
others once the call is over, with the rest, not against the CPU of an agent that shares the machine. Against the
baresip phone agent (examples/phone-agent): its greeting "Welcome to Acme. Press 2 for billing..." and, for the
digit 2, "You chose billing. Your balance is forty two dollars. Goodbye." Before, every reply was transcribed as
its turn ended, read or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents import phone
from agents.voice import needs_voice
from conftest import run_tamesu

pytestmark = [pytest.mark.audio, needs_voice, pytest.mark.timeout(300),
              pytest.mark.skipif(phone.missing() is not None, reason=phone.missing() or "")]


def test_only_the_replies_read_during_a_sip_call_are_transcribed_during_it(tmp_path: Path) -> None:
    (agent,) = phone.start_all([[]])
    try:
        (tmp_path / "sip.tamesu.yaml").write_text(f"""name: sip
targets:
  acme: {{ type: sip, to: "{agent.uri}", ring_timeout: 5s, idle: 1s, turn_timeout: 30s, max_duration: 90s }}
tests:
  - name: nothing reads
    target: acme
    scenario: {{ script: [ {{ dtmf: "2" }} ] }}
    assert: [ {{ contains: {{ value: balance, ignore_case: true }} }} ]
  - name: the wait reads the greeting
    target: acme
    scenario: {{ script: [ {{ wait_for: "press 2 for billing", timeout: 120s }}, {{ dtmf: "2" }} ] }}
    assert: [ {{ contains: {{ value: balance, ignore_case: true }} }} ]
""")
        done = run_tamesu(["run", "--out", "out", "--parallel", "1"], cwd=tmp_path,
                          env={"TAMESU_STORE": "off", "HF_HUB_OFFLINE": "1"}, timeout=240)
    finally:
        agent.stop()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    results: dict[str, dict[str, Any]] = {}
    for path in (tmp_path / "out").rglob("result.json"):
        result = json.loads(path.read_text())
        results[result["test"]] = result
    during_after = {}
    for name, result in results.items():
        assert result["status"] == "passed", (name, result.get("error"), result["assertions"])
        (audio,) = [e["data"] for e in result["events"] if e["name"] == "audio"]
        during_after[name] = (audio["transcribed_during_call"], audio["transcribed_after_call"])
        texts = [t["agent"]["text"].lower() for t in result["turns"]]
        # every reply has its words, read during the call or not
        assert "billing" in texts[0] and "balance" in texts[-1], (name, texts)
        assert result["turns"][0]["agent"]["raw"][-1]["heard"].lower() == texts[0], result["turns"][0]["agent"]
    assert during_after == {"nothing reads": (0, 2), "the wait reads the greeting": (1, 1)}, during_after
