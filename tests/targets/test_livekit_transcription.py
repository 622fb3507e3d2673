"""The livekit target's transcription of a reply: within the turn's `turn_timeout` when something reads its words
during the call (`words_within`, with real Whisper as the slow transcriber: tiny.en on a long reply takes seconds),
else once the call is over (the SDK double of tests/agents/livekit_double.py). Before, a turn waited for its
transcription however long it took, past its turn_timeout, and transcribed every reply during the call.

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
from tamesu.errors import InfraError
from tamesu.targets.audio.within import words_within

pytestmark = [pytest.mark.audio, pytest.mark.timeout(300),
              pytest.mark.skipif(voice_problem() is not None, reason=voice_problem() or "")]

SENTENCE = "We open at nine in the morning and close at six in the evening, every day but Sunday."


def _whisper(clip: Any, finished: list[float]) -> Any:
    """Real Whisper, in a thread: the time it finished goes to `finished`."""
    async def transcribe() -> str:
        from tamesu.audio import stt

        def run() -> str:
            try:
                return stt.transcribe(clip).text
            finally:
                finished.append(time.monotonic())

        return await asyncio.to_thread(run)

    return transcribe


def _speech(repeats: int) -> Any:
    from tamesu.audio import tts
    from tamesu.audio.clip import Clip

    spoken, _ = asyncio.run(tts.say(SENTENCE))
    once = spoken.at(16000).padded(200, 200).samples
    import numpy as np

    return Clip(np.concatenate([once] * repeats), 16000)


def test_a_transcription_past_the_turns_time_ends_with_it_and_is_not_decided(tmp_path: Path) -> None:
    from tamesu.audio import stt

    stt.model()  # loaded first: the bound is on the transcription, not on loading the model
    long = _speech(8)  # some 45 s of speech: seconds of Whisper's on any machine
    session, finished = new_session(tmp_path), []
    started = time.monotonic()

    async def bounded() -> tuple[float, str]:
        try:
            await words_within(_whisper(long, finished), started + 0.5, session=session, speech_ms=long.duration_ms,
                               limit_s=0.5)
        except InfraError as exc:
            return time.monotonic() - started, str(exc)
        return time.monotonic() - started, "no InfraError"

    # (asyncio.run waits for the executor's threads as it ends: Whisper's goes on past the bound)
    ended, said = asyncio.run(bounded())
    assert ended < 1.5, ended  # the turn's time, not the transcription's
    assert said.startswith(f"the agent's reply ({long.duration_ms / 1000:.1f}s of speech) was heard but not "
                           "transcribed within turn_timeout (0.5s): not decided"), said
    (cut,) = events(session, "transcription_cut")
    assert cut["heard_ms"] == round(long.duration_ms, 1)
    # the transcriber was really slower than the bound: it finished well after the turn's time had ended
    assert finished and finished[0] - started > 1.0, (finished, started)


def test_a_transcription_in_time_gives_its_words_and_a_bound_passed_starts_none(tmp_path: Path) -> None:
    short, session = _speech(1), new_session(tmp_path)
    words = asyncio.run(words_within(_whisper(short, []), time.monotonic() + 200, session=session,
                                     speech_ms=short.duration_ms, limit_s=200))
    assert "morning" in words.lower() and "sunday" in words.lower(), words
    assert events(session, "transcription_cut") == []
    asked: list[bool] = []

    async def never() -> str:
        asked.append(True)
        return "words"

    with pytest.raises(InfraError):
        asyncio.run(words_within(never, time.monotonic() - 1, session=session, speech_ms=3000, limit_s=10))
    assert asked == []  # a job nothing would wait for is not started


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
