"""How a sip call's setup ends when it does not connect, and the call's SIP log (`TAMESU_SIP_LOG`), against the
local trunk (tests/agents/sip_trunk.py)."""

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


def _suite(tmp_path: Path, body: str) -> Path:
    suite = tmp_path / "calls.tamesu.yaml"
    suite.write_text(body, encoding="utf-8")
    return suite


def test_tamesu_sip_log_writes_the_calls_signalling_masked_in_the_run_folder(tamesu: Callable,
                                                                           tmp_path: Path) -> None:
    # before: TAMESU_SIP_LOG set PJSIP's log level, and the log went to the worker's stderr, which is /dev/null
    from agents.sip_trunk import SipTrunk

    password = "trunk-pass-4f1c"
    token = "header-token-88d2e1"
    with SipTrunk(username="tamesu", password=password) as trunk:
        suite = _suite(tmp_path, f"""
targets:
  trunk:
    type: sip
    to: "+15551234"
    headers: {{ X-Account: "{{{{secrets.ACCOUNT_TOKEN}}}}" }}
    trunk: {{ host: 127.0.0.1, port: {trunk.port}, username: tamesu, password: "{{{{secrets.TRUNK_PASSWORD}}}}",
             register: true }}
    ring_timeout: 5s
tests:
  - {{ name: logged, target: trunk, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: busy }} ] }}
""")
        env = {**OFFLINE, "TRUNK_PASSWORD": password, "ACCOUNT_TOKEN": token}
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path,
                      env={**env, "TAMESU_SIP_LOG": "1"}, timeout=120)
        typo = tamesu(["run", str(suite), "--out", str(tmp_path / "typo")], cwd=tmp_path,
                      env={**env, "TAMESU_SIP_LOG": "debug"}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    [log] = (tmp_path / "out").rglob("logged/run-1/sip.log")
    text = log.read_text(encoding="utf-8")
    # level 1 asked: every message sent and received is in (PJSIP logs them at its level 4)
    for line in ("REGISTER sip:127.0.0.1:", "SIP/2.0 401 Unauthorized", "INVITE sip:+15551234@127.0.0.1:",
                 "SIP/2.0 407 Proxy Authentication Required", "SIP/2.0 486 Busy Here"):
        assert line in text, line
    assert "X-Account: ***" in text
    # the digest answers: the means to test guessed passwords offline
    [answer] = [line for line in text.splitlines() if line.startswith("Proxy-Authorization:")][:1]
    assert 'response="***"' in answer and 'cnonce="***"' in answer, answer
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes() and token.encode() not in path.read_bytes(), path
    # an unreadable level says so at once, an error of the environment
    assert "TAMESU_SIP_LOG='debug' is not a log level: write 1 (the SIP messages) to 6 (all of PJSIP's detail), " \
           "or 0 for none" in typo.stdout + typo.stderr, typo.stdout + typo.stderr
    assert typo.returncode == 3
