"""Where a reply starts, for the persona that talks over it: AudioConversation over real speech frames.

Seen once under load: after a barge-in, a 40 ms chunk of the talked-over reply came while the caller was still
speaking its next line; it started the next reply's interrupt timer, and the persona barged in again 560 ms
into the real reply."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agents.voice import needs_voice
from tamesu.suite.schema import Persona

pytestmark = [pytest.mark.audio, needs_voice]

FORMAT_RATE = 16000
CHUNK_MS = 40
CALLER = "Could you tell me when the kitchen closes on Sundays?"
"""Long enough (some 2.6 s) that a timer started near its start (100 ms in) is due before it ends (at most 1.2 s);
the test asserts it. Each second more is a second of the audio lane: the line is spoken at a real-time pace."""


def _voice(tmp_path: Path) -> Any:
    from tamesu.audio.conversation import AudioConversation
    from tamesu.audio.formats import AudioFormat
    from tamesu.conversation import Session
    from tamesu.suite.secrets import Redactor
    from tamesu.suite.templates import Context

    persona = Persona.model_validate({"behaviors": {"interrupt_probability": 1}})
    session = Session(context=Context(), artifacts_dir=tmp_path, redactor=Redactor(), run_id="r",
                      base_dir=tmp_path, persona=persona, seed=3)
    return AudioConversation(session, send=AudioFormat("pcm16", FORMAT_RATE),
                             receive=AudioFormat("pcm16", FORMAT_RATE))


async def _speech_chunks(text: str) -> list[bytes]:
    """The agent's words as pcm16 chunks of 40 ms, as a bot streams them."""
    from tamesu.audio import tts

    clip, _ = await tts.say(text)
    data = clip.at(FORMAT_RATE).samples.tobytes()
    step = FORMAT_RATE * CHUNK_MS // 1000 * 2
    return [data[i:i + step] for i in range(0, len(data), step)]


async def test_a_stray_chunk_while_the_caller_speaks_starts_no_reply_and_no_interrupt_timer(tmp_path: Path) -> None:
    from tamesu.audio.behaviors import INTERRUPT_AFTER_MS
    from tamesu.audio.clip import Clip
    from tamesu.audio.level import first_sound, is_speech

    voice = _voice(tmp_path)
    first_reply = await _speech_chunks("We open at nine in the morning and close at ten at night, every day.")
    second_reply = await _speech_chunks("The kitchen closes at nine on Sundays.")
    loud = [chunk for chunk in first_reply if first_sound(chunk)]

    async def quietly(frame: bytes) -> None:
        pass

    await voice.speak("When do you open?", quietly, pause=False)
    for chunk in first_reply:
        voice.agent_audio(chunk, turn=voice.current)
    assert voice.current.agent_from_ms is not None
    voice.end_turn()

    sent = {"frames": 0}
    stray = {"at": 0.0}

    async def barging(frame: bytes) -> None:
        if sent["frames"] == 0:
            voice.barge_in()  # the caller's first frame talks over the first reply, as the targets do
        if sent["frames"] == 5:  # 100 ms into the caller's line: a chunk of the first reply, late
            stray["at"] = voice.session.now_ms()
            voice.agent_audio(loud[len(loud) // 2], turn=voice.current)
        sent["frames"] += 1

    turn = await voice.speak(CALLER, barging, pause=False)
    assert turn.user_to_ms - stray["at"] > INTERRUPT_AFTER_MS[1]  # a timer started at the stray chunk is due
    # the same chunk read only now (a starved reader), stamped with its arrival while the caller spoke
    voice.agent_audio(loud[len(loud) // 3], arrived_ms=stray["at"] + 20, turn=turn)
    assert turn.agent_from_ms is None
    assert not voice.barge_in_due()

    silent = Clip.silence(200, FORMAT_RATE).samples.tobytes()
    voice.agent_audio(silent, turn=turn)
    assert turn.agent_from_ms is None  # a line's digital silence is no reply (a phone bridge sends it throughout)
    import numpy as np

    faint = (np.sin(2 * np.pi * 200 * np.arange(FORMAT_RATE // 5) / FORMAT_RATE) * 100).astype("<i2").tobytes()
    reply_from = voice.agent_audio(faint, turn=turn)  # a sound, no speech: a voice's soft lead-in
    assert turn.agent_from_ms == reply_from >= turn.user_to_ms  # the reply (and time to first audio) starts here
    waited_from = time.monotonic()
    while time.monotonic() - waited_from < INTERRUPT_AFTER_MS[1] / 1000 + 0.1:
        assert not voice.barge_in_due(), "the persona talked over a reply it had heard no word of"
        await asyncio.sleep(0.05)

    spoken_from = None
    for chunk in second_reply:
        start = voice.agent_audio(chunk, turn=turn)
        if spoken_from is None and is_speech(chunk):
            spoken_from = start + first_sound(chunk) * 1000 / FORMAT_RATE
    assert spoken_from is not None
    deadline = time.monotonic() + 60
    while not voice.barge_in_due() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    due_at = voice.session.now_ms()
    assert voice.barge_in_due(), "the persona never talked over the reply"
    assert due_at - spoken_from >= INTERRUPT_AFTER_MS[0]  # counted from the reply's first word
