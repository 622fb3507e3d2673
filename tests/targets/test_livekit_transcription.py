"""The livekit target's transcription of a reply: within the turn's `turn_timeout` when something reads its words
during the call (`AudioConversation.transcribe_by`, with real Whisper as the slow transcriber: tiny.en on a long
reply takes seconds), else once the call is over (the SDK double of tests/agents/livekit_double.py). Before, a turn
waited for its transcription however long it took, past its turn_timeout, and transcribed every reply during the
call.

Untested here: the bound on a real LiveKit server (none can be installed; `test_livekit_target.py`'s end-to-end
test runs only with LIVEKIT_URL)."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest

from sessions import events, new_session
from tamesu.audio.extra import problem as voice_problem
from tamesu.conversation import UserTurn
from tamesu.targets.audio.heard import not_transcribed

pytestmark = [pytest.mark.audio, pytest.mark.timeout(300),
              pytest.mark.skipif(voice_problem() is not None, reason=voice_problem() or "")]

CALLER = "What is my balance?"
SENTENCE = "We open at nine in the morning and close at six in the evening, every day but Sunday."


async def _speech(repeats: int) -> Any:
    from tamesu.audio import tts
    from tamesu.audio.clip import Clip

    spoken, _ = await tts.say(SENTENCE)
    once = spoken.at(16000).padded(200, 200).samples
    import numpy as np

    return Clip(np.concatenate([once] * repeats), 16000)


def _voice(session: Any) -> Any:
    from tamesu.audio.conversation import AudioConversation
    from tamesu.audio.formats import AudioFormat

    return AudioConversation(session, send=AudioFormat("pcm16", 16000), receive=AudioFormat("pcm16", 16000))


async def test_a_transcription_past_the_turns_time_ends_with_it_and_is_not_decided(tmp_path: Path) -> None:
    from tamesu.audio import stt

    stt.model()  # loaded first: the bound is on the transcription, not on loading the model
    long = await _speech(8)  # some 45 s of speech: seconds of Whisper's on any machine
    session = new_session(tmp_path)
    voice = _voice(session)
    started = time.monotonic()
    words = await voice.transcribe_by(long, 0.0, started + 0.5, bound="within turn_timeout (0.5s)")
    ended = time.monotonic() - started
    assert words is None  # Whisper had not read it by then
    assert ended < 1.5, ended  # the turn's time, not the transcription's
    (cut,) = events(session, "transcription_cut")
    assert cut["heard_ms"] == round(long.duration_ms, 1)
    assert cut["note"] == (f"{long.duration_ms / 1000:.1f}s of the agent's speech was heard but not transcribed "
                           "within turn_timeout (0.5s): the turn's text has none of it"), cut
    said = str(not_transcribed(long.duration_ms, 0.5))
    assert said.startswith(f"the agent's reply ({long.duration_ms / 1000:.1f}s of speech) was heard but not "
                           "transcribed within turn_timeout (0.5s): not decided"), said


async def test_a_transcription_in_time_gives_its_words_and_a_bound_passed_starts_none(tmp_path: Path) -> None:
    short, session = await _speech(1), new_session(tmp_path)
    voice = _voice(session)
    words = await voice.transcribe_by(short, 0.0, time.monotonic() + 200, bound="within turn_timeout (200s)")
    late = await voice.transcribe_by(short, 0.0, time.monotonic() - 1, bound="within turn_timeout (10s)")
    await voice.finish()
    assert words is not None and "morning" in words.lower() and "sunday" in words.lower(), words
    assert late is None
    (cut,) = events(session, "transcription_cut")
    assert "within turn_timeout (10s)" in cut["note"]
    (audio,) = events(session, "audio")
    assert audio["transcribed_during_call"] == 1, audio  # a job nothing would wait for is not started


@pytest.mark.skipif(importlib.util.find_spec("livekit.rtc") is None, reason="the livekit extra is not installed")
async def test_a_reply_nothing_reads_during_the_call_is_transcribed_after_it(tmp_path: Path) -> None:
    from targets.test_livekit_target import opened

    rooms: list[Any] = []
    async with opened(tmp_path, rooms, mode="audio", idle=1.2, turn_timeout=20) as (target, session):
        session.reads_reply = lambda: False  # a script of `say`s, no capture: nothing reads it during the call
        turn = await target.send(UserTurn(text="What is my balance?"))
        assert turn.text == ""  # not transcribed while the call goes on
    assert ("balance" in turn.text.lower() and "42" in turn.text) or "forty" in turn.text.lower(), turn.text
    (audio,) = events(session, "audio")
    assert (audio["transcribed_during_call"], audio["transcribed_after_call"]) == (0, 1), audio


@pytest.mark.skipif(importlib.util.find_spec("livekit.rtc") is None, reason="the livekit extra is not installed")
async def test_a_reply_read_during_the_call_has_turn_timeout_from_when_it_was_heard_out(tmp_path: Path) -> None:
    """As on every voice target (`heard.words_by`, docs/voice-targets.md): the bound of a reply's transcription is
    its turn_timeout from when it was heard out, not from the turn's start. tamesu's transcription is held (a
    loaded machine's, tests/speech_held.py) past both: the cut comes turn_timeout after the reply's last sound, or
    later. Before, it came at the turn's start plus turn_timeout: some 5-20 s less after the
    reply's last sound (the double's answer takes its transcription, synthesis and 2.3 s of speech); a reply that
    took most of its turn to say left its transcription the rest. Any reply heard out after the turn's start tells the
    two apart (a cut at the start plus the limit comes less than the limit after its last sound), so the limit need
    only outlast the turn's own time to hear the reply out."""
    from agents.livekit_double import reply
    from speech_held import transcriber_held
    from tamesu.audio import stt, tts
    from tamesu.audio.clip import Clip
    from tamesu.errors import OwnSideError
    from targets.test_livekit_target import opened

    # before the turn, all at once: the double's own Whisper loaded, tamesu's transcription worker up (held below),
    # and both sides' words synthesised (kept by tts for the run, as a line said again is). The turn then takes the
    # caller's words, the double's transcription of them and its 2.3 s of speech, not the synthesis worker's start
    # and Piper's load (which took it over 20 s at load 4, when the limit here was 30 s)
    await asyncio.gather(asyncio.to_thread(stt.model), stt.transcribe_off_loop(Clip.silence(1000, 16000)),
                         tts.say(CALLER), tts.say(reply(CALLER)))
    rooms: list[Any] = []
    limit = 15.0  # the double's answer is heard out within it (5.5-7.7 s after the turn's start at load 22-30)
    async with transcriber_held(), opened(tmp_path, rooms, mode="audio", idle=1.2, turn_timeout=limit) as (
            target, session):
        session.reads_reply = lambda: True  # a capture, a simulator: transcribed during the call
        last_sound: list[float] = []

        async def note_the_last_sound() -> None:
            while not rooms or rooms[0].replies_spoken == 0:
                await asyncio.sleep(0.01)
            last_sound.append(time.monotonic())

        noting = asyncio.create_task(note_the_last_sound())
        started = time.monotonic()
        with pytest.raises(OwnSideError) as raised:
            await target.send(UserTurn(text=CALLER))
        cut_at = time.monotonic()
        noting.cancel()
    assert last_sound, "the agent's reply never ended"
    print(f"heard out {last_sound[0] - started:.1f}s into the turn, cut {cut_at - last_sound[0]:.1f}s after")
    assert cut_at - last_sound[0] >= limit, cut_at - last_sound[0]
    said = str(raised.value)
    assert f"was heard but not transcribed within turn_timeout ({limit:g}s): not decided" in said, said
    (cut,) = events(session, "transcription_cut")
    assert cut["note"].endswith(f"within turn_timeout ({limit:g}s) after it was heard out: the turn's text has none "
                                "of it"), cut


def test_a_cut_in_a_turn_is_the_environments_error_with_the_designs_error_classes_too(tmp_path: Path) -> None:
    """The cut is raised inside the target's `send`, where an infrastructure error is the agent's side (an
    `agent_error` event, which JSONL `--yao-errors` counts as the agent's failure): tamesu's speech-to-text being
    behind is not the agent's, whatever the flag."""
    from tamesu.engine.fault import agents_side
    from tamesu.errors import InfraError
    from tamesu.results.design_classes import design_classes
    from tamesu.results.records import RunResult

    session = new_session(tmp_path)
    with pytest.raises(InfraError) as raised, agents_side(session):
        raise not_transcribed(3000, 10)
    assert events(session, "agent_error") == []
    result = RunResult(suite="s", test="t", run=1, status="error", error=str(raised.value), started_at="",
                       target="lk", target_type="livekit", events=session.events)
    design_classes(result, None, dynamic=False)  # what --yao-errors does to a run that ended in error
    assert (result.status, result.error) == ("error", str(raised.value))
