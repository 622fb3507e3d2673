"""tamesu's SIP phone (a pjsua2 worker process) against a real SIP peer: the example IVR on Debian's baresip."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from agents import phone
from lifeline import tied
from tamesu.targets.sip.phone import SipPhone

pytestmark = [pytest.mark.audio, pytest.mark.xdist_group("audio-sip"),  # the SIP lane (tests/conftest.py)
              pytest.mark.skipif(phone.missing() is not None, reason=phone.missing() or "")]


@pytest.fixture(scope="module")
def ivr() -> Iterator[phone.PhoneAgent]:
    agent = phone.start()
    yield agent
    agent.stop()


def speech_starts(chunks: list[tuple[float, bytes]], threshold: float = 300.0) -> list[float]:
    """When each 100 ms chunk of the agent's audio is loud enough to be speech."""
    return [at for at, pcm in chunks
            if pcm and np.sqrt(np.mean(np.frombuffer(pcm, "<i2").astype(np.float64) ** 2)) > threshold]


async def heard_speech(phone_: SipPhone, within: float = 10.0) -> list[float]:
    """speech_starts once the agent's audio has some, waited for up to `within` seconds (not a fixed pause: a
    loaded machine starts the agent's audio file later)."""
    deadline = time.monotonic() + within
    while not (spoken := speech_starts(phone_.call.audio)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return spoken


async def test_an_outbound_call_hears_the_greeting_and_dtmf_goes_both_ways(ivr: phone.PhoneAgent) -> None:
    phone_ = SipPhone()
    await phone_.start()
    try:
        dialled = time.monotonic()
        await phone_.dial(ivr.uri)
        confirmed = await phone_.wait_for(["confirmed"], 5)
        assert confirmed is not None and confirmed.state == "confirmed"
        assert phone_.call.first("early") is not None and phone_.call.first("early").code == 180
        spoken = await heard_speech(phone_)
        assert spoken, "no greeting heard"
        assert 0.1 < spoken[0] - confirmed.at < 2.0  # the greeting file has 300 ms of lead-in
        await phone_.dtmf("9")
        deadline = time.monotonic() + 8
        while len(phone_.call.dtmf) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert "".join(d for _, d in phone_.call.dtmf) == "1234#"
        assert ivr.events("CALL_DTMF_START")[-1:] == ["9"]  # the agent heard ours (RFC 4733)
        await phone_.dtmf("2")  # billing: it says goodbye and hangs up
        ended = await phone_.wait_for(["disconnected"], 12)
        assert ended is not None and ended.state == "disconnected" and ended.by == "remote"
        assert ended.at - dialled < 25
    finally:
        await phone_.close()


async def test_the_agent_transfers_the_call() -> None:
    # an agent of its own: after a declined transfer, baresip refuses the next call it places (480)
    ivr = phone.start()
    phone_ = SipPhone()
    await phone_.start()
    try:
        await phone_.dial(ivr.uri)
        assert await phone_.wait_for(["confirmed"], 5) is not None
        assert await heard_speech(phone_), "no greeting heard"  # the media is up: our digit can reach the agent
        await phone_.dtmf("3")
        deadline = time.monotonic() + 8
        while not phone_.call.transfers and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert [to for _, to in phone_.call.transfers] == ["sip:billing@127.0.0.1"]
        await phone_.hangup()
        ended = await phone_.wait_for(["disconnected"], 5)
        assert ended is not None and ended.by in ("caller", "remote")
        assert ivr.events("TRANSFER_FAILED") == ["603 Decline"]  # recorded, declined: nobody is behind it
    finally:
        await phone_.close()
        ivr.stop()


async def test_our_speech_goes_out_at_the_calls_pace(ivr: phone.PhoneAgent) -> None:
    phone_ = SipPhone()
    await phone_.start()
    try:
        await phone_.dial(ivr.uri)
        assert await phone_.wait_for(["confirmed"], 5) is not None
        utterance = await phone_.play(b"\x00\x10" * 8000 * 2)  # two seconds
        ended = await phone_.wait_played(utterance, 6)
        started = phone_.call.played[utterance]["start"]
        # never early (a burst would end at once); the upper bound catches a call that plays slower than its
        # clock (half-sized frames would take 4 s) and leaves a second for a loaded machine's late media clock
        assert ended is not None and 1.9 < ended - started < 3.0, ended and ended - started
    finally:
        await phone_.close()


@pytest.mark.parametrize(("mode", "code"), [("busy", 486)])
async def test_a_busy_agent(mode: str, code: int) -> None:
    agent = phone.start("--mode", mode)
    phone_ = SipPhone()
    try:
        await phone_.start()
        await phone_.dial(agent.uri)
        ended = await phone_.wait_for(["confirmed"], 5)
        assert ended is not None and ended.state == "disconnected" and ended.code == code
    finally:
        await phone_.close()
        agent.stop()


async def test_an_agent_that_never_answers_keeps_ringing() -> None:
    agent = phone.start("--mode", "no-answer")
    phone_ = SipPhone()
    try:
        await phone_.start()
        await phone_.dial(agent.uri)
        assert await phone_.wait_for(["confirmed"], 2.0) is None  # still ringing
        assert phone_.call.first("early") is not None and phone_.call.first("early").code == 180
        await phone_.hangup()
        ended = await phone_.wait_for(["disconnected"], 5)
        assert ended is not None and ended.by == "caller"
    finally:
        await phone_.close()
        agent.stop()


async def test_an_inbound_call_from_the_agent_is_answered(ivr: phone.PhoneAgent) -> None:
    phone_ = SipPhone()
    local = await phone_.start()
    try:
        await phone_.listen("caller")
        request = urllib.request.Request(f"{ivr.trigger}/call?to=sip:caller@{local}", method="POST")
        await asyncio.to_thread(urllib.request.urlopen, request, timeout=5)
        assert await phone_.wait_incoming(5)
        await phone_.answer(after_ms=300)
        confirmed = await phone_.wait_for(["confirmed"], 5)
        assert confirmed is not None and confirmed.state == "confirmed"
        assert confirmed.at - phone_.call.incoming[0] >= 0.29  # it rang for the time we let it
        assert await heard_speech(phone_), "no greeting heard on the inbound call"
    finally:
        await phone_.close()


def test_the_worker_dies_with_a_killed_parent(ivr: phone.PhoneAgent) -> None:
    script = textwrap.dedent(f"""
        import asyncio, os, sys
        from tamesu.targets.sip.phone import SipPhone
        async def main():
            p = SipPhone(); await p.start(); await p.dial({ivr.uri!r})
            print(p._process.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.05)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited; only its parent's wait is missing
        return stat.read().split()[2] != "Z"


def test_the_worker_told_to_quit_mid_call_hangs_up_and_ends_at_once(ivr: phone.PhoneAgent) -> None:
    """PJSIP's destroy idled a second for answers nothing was left to take (the account's un-REGISTER, ICE and TURN,
    none of it waited for): every SIP call's run ended a second later than its call. Timed on the worker's own
    clock (its `closed` event), from the quit to the library gone, the call hung up first."""
    worker = subprocess.Popen(tied([sys.executable, "-m", "tamesu.targets.sip._worker", "127.0.0.1", "0", "tamesu"]),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert worker.stdin is not None and worker.stdout is not None
    try:
        events = iter(map(json.loads, worker.stdout))
        assert next(events)["ev"] == "ready"
        worker.stdin.write(json.dumps({"op": "call", "uri": ivr.uri}) + "\n")
        worker.stdin.flush()
        assert any(e["ev"] == "state" and e["state"] == "confirmed" for e in events)
        quit_at = time.monotonic()
        worker.stdin.write(json.dumps({"op": "quit"}) + "\n")
        worker.stdin.flush()
        after = list(events)
        states = [e["state"] for e in after if e["ev"] == "state"]
        closed = [e["t"] for e in after if e["ev"] == "closed"]
        assert states[-1:] == ["disconnected"] and len(closed) == 1, after
        assert closed[0] - quit_at < 0.9, closed[0] - quit_at  # the BYE and the library's end: tens of ms
    finally:
        worker.kill()
        worker.wait()
