"""The phone call assertions' values as templates, against the example IVR (examples/phone-agent, on baresip)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents import phone
from tamesu.audio.extra import problem as voice_problem

reason = phone.missing() or voice_problem()
pytestmark = [pytest.mark.audio, pytest.mark.xdist_group("audio-sip"),  # the SIP lane (tests/conftest.py)
              pytest.mark.skipif(reason is not None, reason=reason or "")]
OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.mark.timeout(240)
def test_dtmf_received_and_transferred_to_fill_their_templates(tamesu: Callable, tmp_path: Path) -> None:
    # before: only a {{vars.x}} was put in (when the plan was made); any other template was compared as written:
    # 'the agent sent '1234#', expected '{{env.ECHO_DIGITS}}''
    agent = phone.start()
    try:
        (tmp_path / "calls.tamesu.yaml").write_text(f"""
targets:
  ivr: {{ type: sip, to: "{agent.uri}", ring_timeout: 10s, max_duration: 60s, idle: 1.2s, turn_timeout: 20s }}
tests:
  - name: digits back
    target: ivr
    scenario: {{ script: [ {{ wait_for: "billing", timeout: 40s }}, {{ dtmf: "9" }} ] }}
    cases:
      - {{ name: right, vars: {{ digits: "{{{{env.ECHO_DIGITS}}}}", first: "{{{{env.ECHO_FIRST}}}}" }} }}
      - {{ name: wrong, vars: {{ digits: "9999", first: "{{{{env.ANY_ONE}}}}" }} }}
    assert:
      - dtmf_received: "{{{{vars.digits}}}}"
      - dtmf_received: {{ matches: "^{{{{vars.first}}}}" }}
  - name: transfer
    target: ivr
    scenario: {{ script: [ {{ wait_for: "talk to a person", timeout: 40s }}, {{ dtmf: "3" }} ] }}
    assert:
      - transferred_to: {{ matches: "^sip:{{{{env.DEPARTMENT}}}}@" }}
""", encoding="utf-8")
        env = {**OFFLINE, "ECHO_DIGITS": "1234#", "ECHO_FIRST": "12", "ANY_ONE": ".", "DEPARTMENT": "billing"}
        done = tamesu(["run", "calls.tamesu.yaml", "--out", "out", "--parallel", "1"], cwd=tmp_path, env=env,
                      timeout=200)
    finally:
        agent.stop()
    said = done.stdout + done.stderr
    assert "PASS  calls/digits back [right]" in said, said
    assert "PASS  calls/transfer" in said, said
    # the value filled in is what the digits were held against, and in `matches` it is text: `.` is a dot
    assert "FAIL  calls/digits back [wrong]" in said, said
    assert "the agent sent '1234#', expected '9999'" in said, said
    assert r"the agent sent '1234#', which does not match '^\\.'" in said, said
    assert done.returncode == 1, said


def test_an_unfilled_template_in_a_call_assertion_is_refused_where_written(tamesu: Callable, tmp_path: Path) -> None:
    (tmp_path / "calls.tamesu.yaml").write_text("""
targets:
  ivr: { type: sip, to: "sip:agent@127.0.0.1:5099" }
tests:
  - name: echo
    target: ivr
    scenario: { script: [ { dtmf: "9" } ] }
    assert:
      - dtmf_received: "{{vars.code}}"
      - transferred_to: { matches: "^sip:{{vars.dept}}@" }
""", encoding="utf-8")
    done = tamesu(["validate", "calls.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("calls.tamesu.yaml:9:24: tests[0].assert[0].dtmf_received: bad template {{vars.code}}: no var 'code' in "
            "the test, its cases, the suite or the project") in done.stdout + done.stderr
    assert "calls.tamesu.yaml:10:36: tests[0].assert[1].transferred_to.matches: bad template {{vars.dept}}" \
        in done.stdout + done.stderr
