"""How a sip call's setup ends when it does not connect, and what it says: a decline, a registrar that never answers,
a call that cannot get through, a challenge left unanswered, a listen address taken, a trigger refused; and the
call's SIP log (`TAMESU_SIP_LOG`). Against the local trunk (tests/agents/sip_trunk.py) and local servers."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents import phone
from conftest import run_tamesu
from tamesu.audio.extra import problem as voice_problem

reason = phone.missing() or voice_problem()
pytestmark = [pytest.mark.audio, pytest.mark.xdist_group("audio-sip"),  # the SIP lane (tests/conftest.py)
              pytest.mark.skipif(reason is not None, reason=reason or "")]
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def _suite(tmp_path: Path, body: str) -> Path:
    suite = tmp_path / "calls.tamesu.yaml"
    suite.write_text(body, encoding="utf-8")
    return suite


REGISTRAR_TEST = "test_a_registrar_that_never_answers_is_named_with_the_time_waited"


@dataclass(frozen=True)
class RegistrarRun:
    port: int
    done: Future[subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module", autouse=True)
def registrar_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        RegistrarRun | None]:
    """The registrar test's run, started as the module's first test starts and read by that test, the module's
    last: most of it is PJSIP resending a REGISTER nobody answers (32 s, its timer F), in which the module's other
    tests run (16 s of the SIP lane at CI's load) instead of after it. Only when that test is to run. The registrar
    is the port of a bound UDP socket nobody reads (a registrar that is down, a firewall that drops)."""
    if not any(item.name == REGISTRAR_TEST for item in request.session.items):
        yield None
        return
    folder = tmp_path_factory.mktemp("silent-registrar")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink, ThreadPoolExecutor(1) as beside:
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        trunk = f"{{ host: 127.0.0.1, port: {port}, username: tamesu, password: pw, register: true }}"
        suite = _suite(folder, f"""
targets:
  short: {{ type: sip, to: "+15551234", trunk: {trunk}, ring_timeout: 3s }}
  long: {{ type: sip, to: "+15551234", trunk: {trunk}, ring_timeout: 60s }}
tests:
  - {{ name: short, target: short, scenario: {{ script: [ {{ say: hello }} ] }} }}
  - {{ name: long, target: long, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = beside.submit(run_tamesu, ["run", str(suite), "--out", str(folder / "out"), "--parallel", "2"],
                             cwd=folder, env=OFFLINE, timeout=150)
        yield RegistrarRun(port, done)
        with contextlib.suppress(Exception):  # its test, which reads it, failed or never ran: the run is waited for
            done.result()


def test_a_declined_call_is_the_agents_outcome_like_a_busy_one(tamesu: Callable, tmp_path: Path) -> None:
    # before: 603 Decline was 'the call was refused: 603 Decline', which no assertion could expect (baresip 1.0
    # rejects every call with 486 whatever it is told: the local trunk declines instead)
    from agents.sip_trunk import SipTrunk

    password = "trunk-pass-603d"
    with SipTrunk(username="tamesu", password=password, call_status=(603, "Decline")) as trunk:
        target = (f"{{ type: sip, to: '+15551234', trunk: {{ host: 127.0.0.1, port: {trunk.port}, username: tamesu, "
                  f"password: {password} }}, ring_timeout: 5s, turn_timeout: 4s }}")
        suite = _suite(tmp_path, f"""
targets:
  ivr: {target}
tests:
  - {{ name: declined, target: ivr, scenario: {{ script: [ {{ say: hello }} ] }} }}
  - {{ name: decline expected, target: ivr, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: declined }} ] }}
  - {{ name: busy expected, target: ivr, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: busy }} ] }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out"), "--parallel", "3"], cwd=tmp_path,
                      env=OFFLINE, timeout=120)
    said = done.stdout + done.stderr
    assert "Traceback" not in said
    assert ("before the first turn: the call was declined: 603 Decline (declined) (`call_ended_by` asserts an "
            "expected end)") in said, said
    assert "refused" not in said and "never reached" not in said
    assert "PASS  calls/decline expected" in said, said
    assert "FAIL  calls/busy expected" in said and "the call ended by declined (603 Decline), expected busy" in said
    assert "fault: environment" not in said
    assert done.returncode == 1, said


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


def test_a_call_that_cannot_get_through_is_where_tamesu_was_sent(tamesu: Callable, tmp_path: Path) -> None:
    # before: PJSIP's own statuses read as the agent refusing the call: 'the call was refused: 502 gethostbyname()
    # has returned error (PJ_ERESOLVE)', 'the call was refused: 503 Connection refused', fault agent, exit 1
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:  # a TCP port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    suite = _suite(tmp_path, f"""
targets:
  nohost: {{ type: sip, to: "sip:agent@no-such-host.invalid", ring_timeout: 10s }}
  closed: {{ type: sip, to: "sip:agent@127.0.0.1:{port};transport=tcp", ring_timeout: 10s }}
tests:
  - {{ name: nohost, target: nohost, scenario: {{ script: [ {{ say: hello }} ] }} }}
  - {{ name: closed, target: closed, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out"), "--parallel", "2"], cwd=tmp_path, env=OFFLINE,
                  timeout=120)
    said = done.stdout + done.stderr
    advice = ": is the address right, is the agent running?"
    # PJSIP finds out at once (the INVITE is not sent), or once its transaction fails: exit 3 either way
    assert re.search(r"sip target nohost: the call to sip:agent@no-such-host\.invalid (could not be placed|did not "
                     r"get through): .*\(PJ_ERESOLVE\)", said), said
    assert (f"sip target closed: the call to sip:agent@127.0.0.1:{port};transport=tcp did not get through: "
            f"Connection refused{advice}") in said, said
    assert "the call was refused" not in said and "Traceback" not in said
    assert done.returncode == 3, said


def test_a_challenge_left_unanswered_says_which_credentials_to_check(tamesu: Callable, tmp_path: Path) -> None:
    # before: 'the call was refused: 407 Proxy Authentication Required', whether the target gave no credentials
    # or credentials for another realm
    from agents.sip_trunk import SipTrunk

    with SipTrunk(username="tamesu", password="trunk-pass-2b7e") as trunk:
        suite = _suite(tmp_path, f"""
targets:
  none: {{ type: sip, to: "+15551234", trunk: {{ host: 127.0.0.1, port: {trunk.port} }}, ring_timeout: 5s }}
  realm:
    type: sip
    to: "+15551234"
    trunk: {{ host: 127.0.0.1, port: {trunk.port}, username: tamesu, password: trunk-pass-2b7e, realm: other.test }}
    ring_timeout: 5s
tests:
  - {{ name: none, target: none, scenario: {{ script: [ {{ say: hello }} ] }} }}
  - {{ name: realm, target: realm, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out"), "--parallel", "2"], cwd=tmp_path,
                      env=OFFLINE, timeout=120)
    said = done.stdout + done.stderr
    assert ("before the first turn: the call was refused: 407 Proxy Authentication Required (it asks for "
            "credentials and the target gives none: set trunk.username and trunk.password)") in said, said
    assert ("before the first turn: the call was refused: 407 Proxy Authentication Required (the credentials were "
            "not taken: check trunk.username and trunk.password, and trunk.realm ('other.test') against the realm "
            "it asks for)") in said, said
    assert done.returncode == 1, said


def test_register_true_without_credentials_still_registers(tamesu: Callable, tmp_path: Path) -> None:
    # before: `register: true` was ignored without a username: no REGISTER, the INVITE went out alone and its 407
    # said nothing of the registration asked for
    from agents.sip_trunk import SipTrunk

    with SipTrunk(username="tamesu", password="trunk-pass-91aa") as trunk:
        suite = _suite(tmp_path, f"""
targets:
  trunk: {{ type: sip, to: "+15551234", trunk: {{ host: 127.0.0.1, port: {trunk.port}, register: true }},
           ring_timeout: 5s }}
tests:
  - {{ name: register, target: trunk, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE, timeout=120)
    said = done.stdout + done.stderr
    assert [s.method for s in trunk.seen] == ["REGISTER"], trunk.seen  # asked, challenged, and no call placed
    assert ("before the first turn: the trunk refused the registration: 401 Unauthorized (it asks for credentials "
            "and the target gives none: set trunk.username and trunk.password); the call was not placed") in said, said
    assert done.returncode == 1, said


def test_a_listen_address_that_is_taken_says_so_in_its_terms(tamesu: Callable, tmp_path: Path) -> None:
    # before: 'the SIP worker did not start: the SIP stack did not start: pjsua_transport_create(type, &tcfg,
    # &tid) error: Address already in use (status=120098) [../src/pjsua2/endpoint.cpp:2284]'
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        suite = _suite(tmp_path, f"""
targets:
  taken: {{ type: sip, to: "sip:agent@127.0.0.1:9", listen: "127.0.0.1:{port}", ring_timeout: 3s }}
tests:
  - {{ name: taken, target: taken, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
        done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE, timeout=120)
    said = done.stdout + done.stderr
    assert (f"sip target taken: the SIP worker did not start: cannot listen for SIP on 127.0.0.1:{port} (listen): "
            "Address already in use") in said, said
    assert "pjsua" not in said and ".cpp" not in said
    assert done.returncode == 3, said


def _refused_trigger(tamesu: Callable, tmp_path: Path, serve: Callable, answer: Any, token: str
                     ) -> tuple[str, str, int]:
    """A run whose inbound call's trigger the server refuses with HTTP 422 and `answer` (a Response); the key
    `token` is in the trigger's query: (the server's url, what the run said, its exit code)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    server = serve(Starlette(routes=[Route("/call", lambda _: answer, methods=["POST"])]))
    suite = _suite(tmp_path, f"""
targets:
  callback:
    type: sip
    direction: inbound
    trigger: {{ http: {{ url: "{server.url}/call?key={{{{secrets.TRIGGER_TOKEN}}}}&to={{{{session.uri}}}}" }} }}
    ring_timeout: 5s
tests:
  - {{ name: refused, target: callback, scenario: {{ script: [ {{ wait_for: hello }} ] }} }}
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path,
                  env={**OFFLINE, "TRIGGER_TOKEN": token}, timeout=120)
    return server.url, done.stdout + done.stderr, done.returncode


def test_a_trigger_the_server_refuses_names_the_request_and_its_answer(tamesu: Callable, tmp_path: Path,
                                                                       serve: Callable) -> None:
    # before: 'the trigger request answered HTTP 422': neither which request nor why
    from starlette.responses import JSONResponse

    token = "trigger-token-5e0c"
    url, said, code = _refused_trigger(tamesu, tmp_path, serve, JSONResponse({"error": "no campaign named spring"},
                                                                             422), token)
    assert re.search(rf"sip target callback: the trigger request to {re.escape(url)}/call\?key=\*\*\*&to=sip:"
                     r"\S+ answered HTTP 422: \{\"error\":\s?\"no campaign named spring\"\}", said), said
    assert token not in said
    assert code == 3, said


def test_a_trigger_answer_cut_short_never_says_the_start_of_a_secret(tamesu: Callable, tmp_path: Path,
                                                                    serve: Callable) -> None:
    # before: the answer was cut bare at 200 characters and then masked: a secret the cut fell in was said up to
    # the cut ("zq7-trig-5e"), since the masking knows only a secret's start cut at an ellipsis
    from starlette.responses import PlainTextResponse

    token = "zq7-trig-5e0c-9981"
    answer = "no campaign named spring:\n" + "x" * 162 + " " + token + " was the key"
    _, said, code = _refused_trigger(tamesu, tmp_path, serve, PlainTextResponse(answer, 422), token)
    assert f"answered HTTP 422: no campaign named spring: {'x' * 162}…" in said, said
    assert token[:6] not in said, said
    assert code == 3, said


def test_an_agent_that_never_calls_back_is_told_with_the_address_it_was_given(tamesu: Callable,
                                                                             tmp_path: Path) -> None:
    # before: 'the agent did not call within 2s (no_answer); the agent was never reached', of an agent the
    # trigger had reached
    suite = _suite(tmp_path, """
targets:
  callback:
    type: sip
    direction: inbound
    inbound_number: customer
    trigger: { run: "true" }
    ring_timeout: 2s
tests:
  - { name: silent, target: callback, scenario: { script: [ { wait_for: hello } ] } }
""")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, env=OFFLINE, timeout=120)
    said = done.stdout + done.stderr
    assert re.search(r"before the first turn: the agent did not call sip:customer@127\.0\.0\.1:\d+ within 2s of the "
                     r"trigger \(no_answer\) \(`call_ended_by` asserts an expected end\)", said), said
    assert "never reached" not in said
    assert done.returncode == 1, said


def test_a_caller_identity_or_a_header_pjsip_cannot_send_is_refused_where_written(tamesu: Callable,
                                                                                  tmp_path: Path) -> None:
    # before: `from: "+15550100"` ran and failed as 'the call to sip:... could not be placed: Invalid URI
    # (PJSIP_EINVALIDURI)', blaming `to`; a header name with a space went out in an INVITE a strict server refuses
    _suite(tmp_path, """
targets:
  bare: { type: sip, to: "sip:agent@127.0.0.1:5099", from: "+15550100" }
  spaced: { type: sip, to: "sip:agent@127.0.0.1:5099", headers: { "Account Id": "7" } }
  named: { type: sip, to: "sip:agent@127.0.0.1:5099", from: '"Acme" <sip:+15550100@acme.test>' }
tests:
  - { name: bare, target: bare, scenario: { script: [ { say: hello } ] } }
  - { name: spaced, target: spaced, scenario: { script: [ { say: hello } ] } }
  - { name: named, target: named, scenario: { script: [ { say: hello } ] } }
""")
    done = tamesu(["validate", "calls.tamesu.yaml"], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert ("calls.tamesu.yaml:3:60: targets.bare.from: '+15550100' is not a SIP URI: write sip:+15550100@example.com, "
            "tel:+15550100, or \"Name\" <sip:+15550100@example.com>") in said, said
    assert "targets.spaced.headers: 'Account Id' is not a SIP header name" in said, said
    assert "targets.named" not in said


# last: the run it reads (registrar_run) went on while the tests before it ran
@pytest.mark.timeout(240)
def test_a_registrar_that_never_answers_is_named_with_the_time_waited(registrar_run: RegistrarRun | None) -> None:
    # before: 'nothing answered the call to sip:+15551234@... within 3s, and it never rang' (no call was placed:
    # the REGISTER was waiting), and past PJSIP's 32 s of resending 'the trunk refused the registration: 408
    # Request Timeout', the agent's fault, exit 1
    assert registrar_run is not None
    done = registrar_run.done.result()
    said = done.stdout + done.stderr
    registrar = f"sip:127.0.0.1:{registrar_run.port}"
    advice = "check trunk.host and trunk.port, and that a registrar runs there taking SIP over udp; the call was " \
             "not placed"
    assert (f"sip target short: the registrar {registrar} never answered the REGISTER within 3s (ring_timeout): "
            f"{advice}") in said, said
    assert re.search(rf"sip target long: the registrar {re.escape(registrar)} never answered the REGISTER within "
                     rf"3\ds \(PJSIP stopped resending it\): {re.escape(advice)}", said), said
    assert "nothing answered" not in said and "refused" not in said and "Traceback" not in said
    assert done.returncode == 3, said
