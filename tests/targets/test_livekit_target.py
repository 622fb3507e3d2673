"""The livekit target against a double of the SDK's boundary (tests/agents/livekit_double.py says how it
behaves: no LiveKit server can be installed here), the real SDK against a server that is not there, and an
end-to-end test that runs only against a real server named by LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ports import refused_port
from sessions import new_session
from tamesu.audio.extra import problem as voice_problem
from tamesu.conversation import Session, UserTurn
from tamesu.targets.livekit import LiveKitSpec, LiveKitTarget

# the extra is looked for, not imported: every xdist worker collects this module, and importing livekit.rtc
# took 0.15 s of CPU in each (test-fast deselects the module whole: audio)
pytestmark = [pytest.mark.audio, pytest.mark.skipif(
    importlib.util.find_spec("livekit.rtc") is None,
    reason="the livekit extra is not installed (pip install 'tamesu[livekit]')")]

SECRET = "s3cr3t-livekit-api-secret-value-of-32-bytes-or-more"


def make_session(tmp_path: Path) -> Session:
    return new_session(tmp_path, environ={"LK_KEY": "APIkey123", "LK_SECRET": SECRET}, run_id="t1", run={"id": "t1"})


@asynccontextmanager
async def opened(tmp_path: Path, rooms: list[Any], **spec: Any) -> AsyncIterator[tuple[LiveKitTarget, Session]]:
    from agents import livekit_double  # imports the livekit SDK, numpy and jwt: not at collection

    session = make_session(tmp_path)
    target = LiveKitTarget(LiveKitSpec.model_validate({
        "type": "livekit", "url": "wss://lk.example.test", "api_key": "{{secrets.LK_KEY}}",
        "api_secret": "{{secrets.LK_SECRET}}", "room": "support-{{run.id}}", "idle": 0.4, **spec}), "lk")
    target.sdk_factory = livekit_double.double(SECRET, "support-t1", rooms)  # type: ignore[method-assign]
    await target.open(session)
    try:
        yield target, session
    finally:
        await target.close()


async def test_text_mode_mints_a_token_finds_the_agent_and_talks_on_the_topics(tmp_path: Path) -> None:
    rooms: list[Any] = []
    async with opened(tmp_path, rooms, dispatch={"agent_name": "bella"}) as (target, session):
        first = await target.send(UserTurn(text="What is my balance?"))
        second = await target.send(UserTurn(text="Thanks, bye"))
    [room] = rooms
    assert room.tokens[0]["sub"] == "tamesu-caller"
    assert room.tokens[0]["roomConfig"]["agents"][0]["agentName"] == "bella"  # dispatched in the token
    assert room.local_participant.texts[0] == ("lk.chat", "What is my balance?")
    assert first.text == "Your balance is forty two dollars."
    assert first.first_token_at_ms is not None and first.latency_ms > 0
    assert second.ended  # the agent left the room
    assert [e.name for e in session.events][:2] == ["transport", "agent_joined"]
    assert room.disconnected


async def test_dtmf_goes_out_and_the_agents_digits_are_recorded(tmp_path: Path) -> None:
    rooms: list[Any] = []
    async with opened(tmp_path, rooms) as (target, session):
        await target.send(UserTurn(text="hello", dtmf="9"))
    assert rooms[0].local_participant.dtmf == ["9"]
    assert "".join(e.data["digit"] for e in session.events if e.name == "sip_dtmf") == "123"


async def test_dtmf_received_grades_the_digits_the_agent_sent_in_the_room(tmp_path: Path) -> None:
    # the spec: "dtmf_received | sip, livekit audio"; before, the check demanded a SIP call and failed with the
    # digits recorded
    from tamesu.checks.base import RunView
    from tamesu.checks.call import DtmfReceived, DtmfReceivedSpec

    rooms: list[Any] = []
    async with opened(tmp_path, rooms) as (target, session):
        await target.send(UserTurn(text="hello", dtmf="9"))
    run = RunView(exchanges=[], metrics={}, captured={}, events=session.events, tool_calls=[],
                  context=session.context, base_dir=tmp_path)
    passed = await DtmfReceived(DtmfReceivedSpec(equals="123")).evaluate(run)
    assert passed.passed, passed.reason
    failed = await DtmfReceived(DtmfReceivedSpec(equals="124")).evaluate(run)
    assert not failed.passed and '"123"' in failed.reason


async def test_no_agent_in_the_room_is_an_infrastructure_error(tmp_path: Path) -> None:
    from tamesu.errors import InfraError

    rooms: list[Any] = []
    with pytest.raises(InfraError, match=r"no agent joined room support-t1 within 0\.3s"):
        async with opened(tmp_path, rooms, agent_identity="^nobody$", join_timeout=0.3):
            pass


async def test_a_password_in_the_url_is_sent_whole_and_named_without_it(tmp_path: Path) -> None:
    # the url's user:password@ is rendered as a url (b214d6df: a templated password holding `/` ended the host) and
    # never named (c198d7e5: the transport event and 'cannot reach' kept it)
    from agents import livekit_double
    from sessions import events
    from tamesu.errors import InfraError

    rooms: list[Any] = []
    for host in ("lk.example.test", "unreachable.example.test"):
        session = new_session(tmp_path, environ={"LK_KEY": "APIkey123", "LK_SECRET": SECRET, "LK_PW": "pw/x?y#z"},
                              run_id="t1", run={"id": "t1"})
        target = LiveKitTarget(LiveKitSpec.model_validate({
            "type": "livekit", "url": f"wss://lk:{{{{secrets.LK_PW}}}}@{host}", "api_key": "{{secrets.LK_KEY}}",
            "api_secret": "{{secrets.LK_SECRET}}", "room": "support-{{run.id}}", "idle": 0.4}), "lk")
        target.sdk_factory = livekit_double.double(SECRET, "support-t1", rooms)  # type: ignore[method-assign]
        try:
            await target.open(session)
        except InfraError as exc:
            assert str(exc).startswith("livekit target lk: cannot reach wss://***@unreachable.example.test: "), exc
            assert "pw/x" not in str(exc)
        else:
            assert events(session, "transport")[0]["url"] == "wss://***@lk.example.test"
        finally:
            await target.close()
    assert rooms[0].connected_url == "wss://lk:pw%2Fx%3Fy%23z@lk.example.test"
    assert rooms[1].connected_url is None  # refused


async def test_the_minted_token_is_masked_where_an_error_quotes_it(tmp_path: Path) -> None:
    # before: the access token tamesu mints (a bearer credential for the room, valid for hours) was never given
    # to the redactor: an SDK error quoting the URL it joined with (`?access_token=...`) was said with it
    import dataclasses

    from agents import livekit_double
    from tamesu.errors import InfraError

    made = livekit_double.double(SECRET, "support-t1", [])
    minted: list[str] = []

    def factory() -> Any:
        sdk = made()
        room = sdk.room

        def refusing() -> Any:
            joined = room()

            async def connect(url: str, token: str) -> None:
                minted.append(token)
                raise ConnectionError(f"failed to connect to {url}/rtc?access_token={token}: 401")

            joined.connect = connect
            return joined

        return dataclasses.replace(sdk, room=refusing)

    session = make_session(tmp_path)
    target = LiveKitTarget(LiveKitSpec.model_validate({
        "type": "livekit", "url": "wss://lk.example.test", "api_key": "{{secrets.LK_KEY}}",
        "api_secret": "{{secrets.LK_SECRET}}", "room": "support-{{run.id}}"}), "lk")
    target.sdk_factory = factory  # type: ignore[method-assign]
    with pytest.raises(InfraError) as caught:
        await target.open(session)
    await target.close()
    [token] = minted
    assert "/rtc?access_token=***: 401" in str(caught.value), str(caught.value)
    assert token[:12] not in str(caught.value) and token not in session.redactor.text(f"said {token} here")


@pytest.mark.skipif(voice_problem() is not None, reason=voice_problem() or "")
async def test_audio_mode_speaks_hears_and_measures(tmp_path: Path) -> None:
    rooms: list[Any] = []
    # the turn ends after `idle` (the default, 1.2 s) of silence: the longest pause inside the agent's reply is
    # 0.1 to 0.14 s, on a quiet machine as at a twelfth of a core (cpulimit -l 8: the double speaks on the
    # wall clock and catches up after a stall), so a pause never ends the turn; that the whole reply was
    # heard in it is checked by the reply's last sound having gone out before the turn ended
    async with opened(tmp_path, rooms, mode="audio", idle=1.2, turn_timeout=20) as (target, session):
        turn = await target.send(UserTurn(text="What is my balance?"))
        assert rooms[0].replies_spoken == 1, "the turn ended before the agent's reply did"
    assert ("balance" in turn.text.lower() and "42" in turn.text) or "forty" in turn.text.lower()
    assert turn.audio is not None and turn.audio.user_to_ms is not None
    assert turn.measures["time_to_first_audio_ms"] > 0
    assert (tmp_path / "audio.wav").exists()
    assert session.counters["agent_speech_ms"] > 1000 and session.counters["user_speech_ms"] > 500
    assert session.counters["talk_over_ratio"] == 0.0  # nobody talked over anybody


def test_an_unreachable_server_exits_3_with_one_line(tamesu: Callable, tmp_path: Path) -> None:
    suite = tmp_path / "lk.tamesu.yaml"
    suite.write_text(f"""
targets:
  room: {{ type: livekit, url: "ws://127.0.0.1:{refused_port()}", api_key: key, api_secret: "{SECRET}",
           connect: {{ timeout: 3s }}, join_timeout: 3 }}
tests:
  - {{ name: hello, target: room, scenario: {{ script: [ {{ say: hi }} ] }} }}
""", encoding="utf-8")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "livekit target room: cannot reach ws://127.0.0.1:" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert SECRET not in done.stdout + "".join(p.read_text(errors="ignore") for p in (tmp_path / "out").rglob("*")
                                               if p.is_file())


LIVE = all(os.environ.get(name) for name in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"))


@pytest.mark.skipif(not LIVE, reason="no LiveKit server: set LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET "
                                     "(and LIVEKIT_AGENT, the agent to dispatch) to run against a real one")
def test_against_a_real_livekit_server(tamesu: Callable, tmp_path: Path) -> None:
    suite = tmp_path / "live.tamesu.yaml"
    agent = os.environ.get("LIVEKIT_AGENT")
    dispatch = f", dispatch: {{ agent_name: {json.dumps(agent)} }}" if agent else ""
    suite.write_text(f"""
targets:
  room: {{ type: livekit, url: "{{{{env.LIVEKIT_URL}}}}", api_key: "{{{{secrets.LIVEKIT_API_KEY}}}}",
           api_secret: "{{{{secrets.LIVEKIT_API_SECRET}}}}"{dispatch}, turn_timeout: 30s }}
tests:
  - {{ name: hello, target: room, scenario: {{ script: [ {{ say: "Hello, who am I talking to?" }} ] }},
       assert: [ {{ turns: {{ gte: 1 }} }} ] }}
""", encoding="utf-8")
    done = tamesu(["run", str(suite), "--out", str(tmp_path / "out")], cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
