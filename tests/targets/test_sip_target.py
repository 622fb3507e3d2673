"""The sip target through the command, against the example phone IVR (examples/phone-agent, on baresip) started
with other modes and arguments, and small SIP parts written here (test_sip_ivr.py: the IVR as it ships)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import wave
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agents import phone
from conftest import run_tamesu
from lifeline import tied
from tamesu.audio.extra import problem as voice_problem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "phone-agent"
reason = phone.missing() or voice_problem()
pytestmark = [pytest.mark.audio, pytest.mark.xdist_group("audio-sip"),  # the SIP lane (tests/conftest.py)
              pytest.mark.skipif(reason is not None, reason=reason or "")]
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def results(out: Path) -> dict[str, dict]:
    [run] = out.iterdir()
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return {line["test"]: json.loads((run / line["runs"][0]["dir"] / "result.json").read_text())
            if "dir" in line["runs"][0] else line for line in lines}


def _suite(tmp_path: Path, body: str) -> Path:
    suite = tmp_path / "calls.tamesu.yaml"
    suite.write_text(body, encoding="utf-8")
    return suite


def test_busy_unanswered_dropped_and_silent_calls_end_the_right_way(tamesu: Callable, tmp_path: Path) -> None:
    modes = ("busy", "no-answer", "drop", "silent")
    agents = dict(zip(modes, phone.start_all([["--mode", mode] for mode in modes]), strict=True))
    try:
        targets = "".join(
            f"  {mode.replace('-', '_')}: {{ type: sip, to: '{agent.uri}', ring_timeout: 3s, idle: 1s, "
            f"turn_timeout: 4s, max_duration: 20s }}\n" for mode, agent in agents.items())
        suite = _suite(tmp_path, f"""
targets:
{targets}
tests:
  - {{ name: busy, target: busy, scenario: {{ script: [ {{ say: hello }} ] }}, assert: [ {{ call_ended_by: busy }} ] }}
  - {{ name: no answer, target: no_answer, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: no_answer }} ] }}
  - {{ name: dropped, target: drop, scenario: {{ script: [ {{ wait_for: never said }} ] }},
       assert: [ {{ call_ended_by: agent }} ] }}
  - {{ name: silent, target: silent, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ turns: {{ gte: 1 }} }} ] }}
""")
        out = tmp_path / "out"
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "4"], cwd=tmp_path, env=OFFLINE,
                      timeout=120)
    finally:
        for agent in agents.values():
            agent.stop()
    assert "Traceback" not in done.stdout + done.stderr
    assert "PASS  calls/busy" in done.stdout, done.stdout
    assert "PASS  calls/no answer" in done.stdout, done.stdout
    assert "PASS  calls/dropped" in done.stdout, done.stdout
    # an agent that answers and never speaks: one clear failed turn, not a hang
    assert "FAIL  calls/silent" in done.stdout and "said nothing within 4s" in done.stdout, done.stdout
    assert done.returncode == 1


def test_a_call_to_an_address_where_nothing_listens_is_where_tamesu_was_sent(tamesu: Callable,
                                                                           tmp_path: Path) -> None:
    # before: "the call was not answered within 3s (no_answer); the agent was never reached", fault agent, exit 1
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # a UDP port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    suite = _suite(tmp_path, f"""
targets:
  nobody: {{ type: sip, to: "sip:agent@127.0.0.1:{port}", ring_timeout: 3s }}
tests:
  - {{ name: dial, target: nobody, scenario: {{ script: [ {{ wait_for: billing }} ] }} }}
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE)
    assert done.returncode == 3, done.stdout + done.stderr
    assert (f"nothing answered the call to sip:agent@127.0.0.1:{port} within 3s, and it never rang: is the "
            "address right, is the agent running?") in done.stdout, done.stdout


def test_an_inbound_trigger_that_cannot_be_reached_names_where_and_why(tamesu: Callable, tmp_path: Path) -> None:
    # before: "the trigger request failed: ConnectError", neither the URL nor the reason
    suite = _suite(tmp_path, """
targets:
  callback:
    type: sip
    direction: inbound
    trigger: { http: { url: "http://127.0.0.1:1/call?to={{session.uri}}", method: POST } }
    ring_timeout: 5s
tests:
  - { name: no trigger, target: callback, scenario: { script: [ { wait_for: billing } ] } }
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the trigger request to http://127.0.0.1:1/call?to=sip:" in done.stdout
    assert "failed: Connection refused" in done.stdout, done.stdout


def test_a_call_assertion_on_a_text_target_says_there_was_no_call(tamesu: Callable, tmp_path: Path) -> None:
    suite = _suite(tmp_path, """
models: { bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] } }
targets: { bot: { type: model, model: bot } }
tests:
  - { name: no call, target: bot, scenario: { script: [ { say: hi } ] }, assert: [ { dtmf_received: "1" } ] }
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path)
    # the suite's asking, not the agent's failure: the suite's error (exit 2, fault suite), warned where written
    assert done.returncode == 2, done.stdout + done.stderr
    assert "dtmf_received: needs the digits the agent sends on the line, which model target bot never hears" \
        in done.stdout
    assert "fault: suite" in done.stdout


def test_a_number_is_dialled_through_a_trunk_that_asks_for_digest_credentials(tamesu: Callable,
                                                                               tmp_path: Path) -> None:
    from agents.sip_trunk import SipTrunk

    password = "trunk-pass-93e1"
    with SipTrunk(username="tamesu", password=password) as trunk, \
            SipTrunk(username="tamesu", password=password) as strict:
        suite = _suite(tmp_path, f"""
targets:
  good:
    type: sip
    to: "+15551234"
    trunk: {{ host: 127.0.0.1, port: {trunk.port}, username: tamesu, password: "{{{{secrets.TRUNK_PASSWORD}}}}",
             register: true }}
    ring_timeout: 3s
    turn_timeout: 4s
  wrong:
    type: sip
    to: "+15551234"
    trunk: {{ host: 127.0.0.1, port: {strict.port}, username: tamesu, password: "not-the-password" }}
    ring_timeout: 3s
    turn_timeout: 4s
tests:
  - {{ name: through the trunk, target: good, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: busy }} ] }}
  - {{ name: wrong password, target: wrong, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        out = tmp_path / "out"
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "1"], cwd=tmp_path,
                      env={**OFFLINE, "TRUNK_PASSWORD": password}, timeout=120)
    # registered, then called the number at the trunk, each time answering the challenge with the right digest
    registered = [s for s in trunk.seen if s.method == "REGISTER"]
    assert registered[0].user is None and any(s.user == "tamesu" and s.digest_ok for s in registered[1:])
    invites = [s for s in trunk.seen if s.method == "INVITE"]
    assert invites[0].uri == f"sip:+15551234@127.0.0.1:{trunk.port}" and invites[0].user is None
    assert invites[1].user == "tamesu" and invites[1].digest_ok
    assert "PASS  calls/through the trunk" in done.stdout, done.stdout
    # without register: the call alone, its digest wrong, refused; the test fails saying so
    assert [s.method for s in strict.seen if s.method == "REGISTER"] == []
    assert any(s.method == "INVITE" and s.user == "tamesu" and not s.digest_ok for s in strict.seen)
    assert "FAIL  calls/wrong password" in done.stdout and "403" in done.stdout, done.stdout
    assert done.returncode == 1
    for path in out.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


def test_a_busy_or_unanswered_call_fails_unless_the_test_expects_it(tamesu: Callable, tmp_path: Path) -> None:
    from agents.sip_trunk import SipTrunk

    password = "trunk-pass-77c2"
    with SipTrunk(username="tamesu", password=password) as busy, \
            SipTrunk(username="tamesu", password=password, call_status=(480, "Temporarily Unavailable")) as away:
        trunk = "{{ host: 127.0.0.1, port: {port}, username: tamesu, password: \"{password}\" }}"
        suite = _suite(tmp_path, f"""
targets:
  busy: {{ type: sip, to: "+15551234", trunk: {trunk.format(port=busy.port, password=password)},
           ring_timeout: 3s, turn_timeout: 4s }}
  away: {{ type: sip, to: "+15551234", trunk: {trunk.format(port=away.port, password=password)},
           ring_timeout: 3s, turn_timeout: 4s, greeting: false }}
  refused: {{ type: sip, to: "+15551234", trunk: {trunk.format(port=away.port, password="wrong")},
              ring_timeout: 3s, turn_timeout: 4s, greeting: false }}
tests:
  - {{ name: busy unasserted, target: busy, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ not_contains: refund }} ] }}
  - {{ name: busy expected, target: busy, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: [busy, no_answer] }} ] }}
  - {{ name: unanswered unasserted, target: away, scenario: {{ script: [ {{ say: hello }} ] }} }}
  - {{ name: refused without greeting, target: refused, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        out = tmp_path / "out"
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "2"], cwd=tmp_path, env=OFFLINE,
                      timeout=120)
    said = done.stdout + done.stderr
    assert "Traceback" not in said
    assert done.returncode == 1, said
    # a call that never connected is no conversation: the script's step was never said, and the test says why
    assert "FAIL  calls/busy unasserted" in said, said
    assert "before the first turn: the call was busy: 486 Busy Here (busy)" in said, said
    assert "FAIL  calls/unanswered unasserted" in said, said
    assert "before the first turn: the call was not answered: 480 Temporarily Unavailable (no_answer)" in said
    # asserting that ending makes it the test's expected outcome
    assert "PASS  calls/busy expected" in said, said
    # a refusal with greeting: false happened before any turn, and says so (not "the agent's greeting")
    assert "FAIL  calls/refused without greeting" in said, said
    assert "before the first turn: the call was refused: 403 Forbidden" in said, said
    assert "the agent's greeting" not in said
    results_by_test = results(out)
    assert results_by_test["busy unasserted"]["end_reason"] == "turn_failed"
    assert results_by_test["busy unasserted"]["turns"] == []


def test_a_call_over_tcp_reaches_the_agent_and_one_the_stack_cannot_place_says_why(tamesu: Callable,
                                                                                  tmp_path: Path) -> None:
    # before: the worker had no TCP transport, so `;transport=tcp` (a trunk's `transport: tcp`) and a malformed
    # URI were refused by PJSIP unseen, and the run waited out ring_timeout to blame the address ("nothing
    # answered ... and it never rang")
    agent = phone.start("--mode", "busy")  # baresip listens on TCP too
    try:
        suite = _suite(tmp_path, f"""
targets:
  tcp: {{ type: sip, to: "{agent.uri};transport=tcp", ring_timeout: 20s, turn_timeout: 4s }}
  bad: {{ type: sip, to: "sip:agent x@127.0.0.1:5", ring_timeout: 60s }}
tests:
  - {{ name: over tcp, target: tcp, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: busy }} ] }}
  - {{ name: bad uri, target: bad, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out"), "--parallel", "1"], cwd=tmp_path,
                      env=OFFLINE, timeout=120)
    finally:
        agent.stop()
    said = done.stdout + done.stderr
    assert "PASS  calls/over tcp" in said, said
    assert ("sip target bad: the call to sip:agent x@127.0.0.1:5 could not be placed: Invalid Request URI "
            "(PJSIP_EINVALIDREQURI)") in said, said
    assert "nothing answered" not in said and "Traceback" not in said
    assert done.returncode == 3, said


def test_an_agent_speaking_on_early_media_has_a_greeting_time_from_its_183(tamesu: Callable, tmp_path: Path) -> None:
    # before: greeting_ms counted from the 200 OK, so speech on early media (before it) made it negative
    from tamesu.audio import tts  # the voice extra: this module is skipped without it

    clip, _ = asyncio.run(tts.say("Welcome to Acme. Press 2 for billing."))
    announcement = tmp_path / "announcement.wav"
    with wave.open(str(announcement), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(1600 * 2) + clip.at(8000).samples.astype("<i2").tobytes() + bytes(8000 * 2 * 5))
    agent = subprocess.Popen(tied([sys.executable, str(ROOT / "tests" / "agents" / "early_media.py"), "3",
                                   str(announcement)]), stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        said = []
        while (line := agent.stdout.readline()) and not (uri := re.search(r"listening (sip:\S+)", line)):
            said.append(line)  # pjlib's own first lines, written before its log level is set
        assert uri is not None, said
        suite = _suite(tmp_path, f"""
targets:
  early: {{ type: sip, to: "{uri.group(1)}", ring_timeout: 20s, idle: 1s, turn_timeout: 20s }}
tests:
  - {{ name: early media, target: early, scenario: {{ script: [ {{ wait_for: ".", timeout: 20s }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE, timeout=120)
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    result = results(tmp_path / "out")["early media"]
    metrics = result["metrics"]
    assert metrics["ring_ms"] >= 2500, metrics  # answered 3 s after the INVITE
    # the words start 0.2 s into the early media: well before the answer, and not before the 183
    assert 0 <= metrics["greeting_ms"] < 2500, metrics
    [early] = [e["data"] for e in result["events"] if e["name"] == "early_media"]
    assert early["code"] == 183 and early["spoke_before_answer_ms"] > 500, early
    assert "billing" in result["turns"][0]["agent"]["text"].lower()
    assert done.returncode == 0, done.stdout + done.stderr


def _worker_at(port: int) -> int | None:
    """The SIP worker (any process's) bound to `port`: its command line names it, and nothing else has it."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"tamesu.targets.sip._worker" in argv and str(port).encode() in argv:
                return int(entry.name)
    return None


def test_a_sip_worker_that_dies_mid_call_is_an_infrastructure_error_at_once(tmp_path: Path) -> None:
    # before: no more audio came, so the greeting never fell silent: 'the agent's reply did not end within
    # turn_timeout (60s): it was still talking then', fault agent, a minute later
    import socket

    agent = phone.start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # the worker's port, to know it by
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    try:
        suite = _suite(tmp_path, f"""
targets:
  ivr: {{ type: sip, to: "{agent.uri}", listen: "127.0.0.1:{port}", ring_timeout: 20s, idle: 1s, turn_timeout: 60s }}
tests:
  - {{ name: worker killed, target: ivr, scenario: {{ script: [ {{ wait_for: billing }} ] }} }}
""")
        with ThreadPoolExecutor(1) as beside:
            running = beside.submit(run_tamesu, ["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path,
                                    env=OFFLINE, timeout=120)
            deadline = time.monotonic() + 60
            while not agent.events("CALL_ESTABLISHED") and time.monotonic() < deadline and not running.done():
                time.sleep(0.05)
            worker = _worker_at(port)
            assert worker is not None and agent.events("CALL_ESTABLISHED"), agent.lines
            killed_at = time.monotonic()
            os.kill(worker, signal.SIGKILL)
            done = running.result()
        took = time.monotonic() - killed_at
    finally:
        agent.stop()
    said = done.stdout + done.stderr
    assert "sip target ivr: the SIP worker ended in the middle of the call (killed by signal 9)" in said, said
    assert "Traceback" not in said and "still talking" not in said
    assert done.returncode == 3, said
    assert took < 45, took  # not turn_timeout waited out


def test_register_true_registers_before_the_call_and_a_refused_registration_says_so(tamesu: Callable,
                                                                                    tmp_path: Path) -> None:
    # before: the INVITE went out beside the REGISTER (a trunk that takes calls only from a registered user
    # refused it), and a refused REGISTER was said nowhere: only the call's own 403, when there was one
    from agents.sip_trunk import SipTrunk

    password = "trunk-pass-5d0a"
    with SipTrunk(username="tamesu", password=password) as good, \
            SipTrunk(username="tamesu", password=password) as strict:
        trunk = "{{ host: 127.0.0.1, port: {port}, username: tamesu, password: \"{password}\", register: true }}"
        suite = _suite(tmp_path, f"""
targets:
  good: {{ type: sip, to: "+15551234", trunk: {trunk.format(port=good.port, password=password)},
           ring_timeout: 5s, turn_timeout: 4s }}
  wrong: {{ type: sip, to: "+15551234", trunk: {trunk.format(port=strict.port, password="not-it")},
            ring_timeout: 5s, turn_timeout: 4s }}
tests:
  - {{ name: registered, target: good, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: busy }} ] }}
  - {{ name: refused, target: wrong, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        out = tmp_path / "out"
        done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "1"], cwd=tmp_path, env=OFFLINE,
                      timeout=120)
    said = done.stdout + done.stderr
    methods = [(s.method, s.digest_ok) for s in good.seen]
    first_invite = methods.index(("INVITE", False))
    assert ("REGISTER", True) in methods[:first_invite], methods
    assert "PASS  calls/registered" in said, said
    assert [s.method for s in strict.seen if s.method == "INVITE"] == []  # never placed
    assert ("before the first turn: the trunk refused the registration: 403 Forbidden; the call was not placed"
            in said), said
    assert done.returncode == 1, said
    events = results(out)["registered"]["events"]
    assert {"code": 200, "reason": "OK"} in [e["data"] for e in events if e["name"] == "sip_registration"]


def test_an_agent_without_g711_is_a_refusal_that_names_the_codecs(tamesu: Callable, tmp_path: Path) -> None:
    # before: 'the call was refused: 488 Not Acceptable Here', not what was not acceptable
    announcement = tmp_path / "silence.wav"
    with wave.open(str(announcement), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(8000 * 2))
    agent = subprocess.Popen(tied([sys.executable, str(ROOT / "tests" / "agents" / "early_media.py"), "0",
                                   str(announcement), "G722"]), stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        while (line := agent.stdout.readline()) and not (uri := re.search(r"listening (sip:\S+)", line)):
            pass
        assert uri is not None
        suite = _suite(tmp_path, f"""
targets:
  wideband: {{ type: sip, to: "{uri.group(1)}", ring_timeout: 10s, turn_timeout: 4s }}
tests:
  - {{ name: codec, target: wideband, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE, timeout=120)
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    said = done.stdout + done.stderr
    assert ("before the first turn: the call was refused: 488 Not Acceptable Here (no audio codec in common: "
            "tamesu offers PCMU and PCMA, G.711)") in said, said
    assert done.returncode == 1, said


def test_an_agent_that_calls_and_hangs_up_while_it_rings_is_said_to_have_hung_up(tamesu: Callable,
                                                                                 tmp_path: Path) -> None:
    # before: 'the call was not answered: 487 Request Terminated (no_answer); the agent was never reached', of a
    # call the agent placed and then cancelled
    caller = ROOT / "tests" / "agents" / "sip_caller.py"
    suite = _suite(tmp_path, f"""
targets:
  callback:
    type: sip
    direction: inbound
    trigger: {{ run: "'{sys.executable}' '{caller}' '{{{{session.uri}}}}' 1 >/dev/null 2>&1 &" }}
    answer_after: 20s
    ring_timeout: 20s
tests:
  - {{ name: gave up, target: callback, scenario: {{ script: [ {{ wait_for: hello }} ] }} }}
  - {{ name: expected, target: callback, scenario: {{ script: [ {{ wait_for: hello }} ] }},
       assert: [ {{ call_ended_by: agent }} ] }}
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out"), "--parallel", "1"], cwd=tmp_path, env=OFFLINE,
                  timeout=120)
    said = done.stdout + done.stderr
    assert re.search(r"before the first turn: the agent hung up before tamesu answered, \d+\.\ds into answer_after "
                     r"\(20s\): 487 Request Terminated \(agent\) \(`call_ended_by` asserts an expected end\)",
                     said), said
    assert "never reached" not in said and "not answered" not in said
    assert "PASS  calls/expected" in said, said
    assert done.returncode == 1, said
