"""Whisper's decoding is bounded by the clip's length (`stt.token_bound`): greedy decoding at temperature 0 can loop
on a phrase, and every call that had such a reply waited for the loop after it was over. The words of real speech,
however fast, come well within the bound. A transcription the bound stopped says so, in the turn's record, the
transcript's line and an event: its words are not what was said."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from agents.voice import needs_voice

pytestmark = [pytest.mark.audio, needs_voice]

LOOP = Path(__file__).parent / "data" / "whisper_loop.ulaw.gz"
"""A reply of the reference pipecat bot as tamesu heard it over Twilio (its 8 kHz line at 16 kHz, mu-law
here; 5.3 s), "I can book a table for you. For how many people?": tiny.en heard "I can both be able to be able
to be able to ..." for 224 tokens, 2.1 s of CPU where the words took 0.66 s."""


def test_a_reply_whisper_loops_on_is_decoded_no_further_than_its_length_bounds() -> None:
    from tamesu.audio import codecs, stt
    from tamesu.audio.clip import Clip

    clip = Clip(codecs.decode(gzip.decompress(LOOP.read_bytes()), "mulaw"), 16000)
    heard = stt.transcribe(clip)
    words = heard.text.split()
    assert words[:3] == ["I", "can", "both"], heard.text  # the loop it was: the bound cut it, not another hearing
    # before: some 70 times "be able to" (224 tokens); now 80 tokens at most (`token_bound(5.3)`), a word a token
    # or more
    assert len(words) <= 80, heard.text
    # and the bound is the one said: passed as it was, CTranslate2 decoded half of it (39 words)
    assert len(words) >= 70, heard.text
    assert heard.cut, heard.text


def _loop_clip() -> Any:
    from tamesu.audio import codecs
    from tamesu.audio.clip import Clip

    return Clip(codecs.decode(gzip.decompress(LOOP.read_bytes()), "mulaw"), 16000)


async def test_a_reply_the_bound_cut_is_said_in_its_turn_its_transcript_line_and_an_event(tmp_path: Path) -> None:
    """Two replies heard on one call, transcribed once it is over: the looping one is marked cut (the turn's
    `agent_said_cut`, the transcript line's `heard_cut`, a `transcription_bounded` event), the other is not."""
    from tamesu.audio import tts
    from tamesu.audio.conversation import AudioConversation
    from tamesu.audio.formats import AudioFormat
    from tamesu.conversation import AgentTurn, Exchange, Session
    from tamesu.engine.conversation import _lines
    from tamesu.suite.secrets import Redactor
    from tamesu.suite.templates import Context

    session = Session(context=Context(), artifacts_dir=tmp_path, redactor=Redactor(), run_id="r", base_dir=tmp_path)
    fmt = AudioFormat("pcm16", 16000)
    voice = AudioConversation(session, send=fmt, receive=fmt)
    plain, _ = await tts.say("We open at nine in the morning.")
    turns = []
    for clip in (_loop_clip(), plain):
        voice.listen_only()
        data = clip.at(16000).samples.astype("<i2").tobytes()
        for i in range(0, len(data), 1280):  # 40 ms chunks, as a bot streams them
            voice.agent_audio(data[i:i + 1280], turn=voice.current)
        turns.append(voice.end_turn()[0])
    await voice.finish()
    looped, answer = turns
    assert looped.agent_said_cut and (looped.agent_said or "").startswith("I can both"), looped.agent_said
    assert not answer.agent_said_cut and "nine" in (answer.agent_said or ""), answer.agent_said
    bounded = [e for e in session.events if e.name == "transcription_bounded"]
    assert len(bounded) == 1 and bounded[0].data["tokens"] == 80, bounded
    assert "looped on" in bounded[0].data["note"]
    exchanges = [Exchange(i + 1, None, AgentTurn(text=t.agent_said or "", audio=t)) for i, t in enumerate(turns)]
    lines = [line.model_dump() for line in _lines(exchanges)]
    assert lines[0]["heard_cut"] is True
    assert "heard_cut" not in lines[1], lines[1]  # written only when true: every other line reads as it did
    assert "agent_said_cut" not in answer.model_dump(), answer.model_dump()


def test_fast_speech_keeps_every_word_within_the_bound() -> None:
    """Twice Piper's rate (more than 8 tokens a second, digits and a spelled code) is heard whole."""
    import asyncio

    from tamesu.audio import stt, tts, wer

    text = ("I have booked a table for four at eight o'clock tomorrow evening, under the name Smith. Your reference "
            "is X7Q 99, and the code is 0 0 7 3 1. Is there anything else?")
    spoken, _ = asyncio.run(tts.say(text, None, 2.0))
    heard = stt.transcribe(spoken)
    assert heard.text.rstrip(".?! ").lower().endswith("anything else"), heard.text
    assert wer.word_error_rate([(text, heard.text)]) <= 0.35, heard.text
    assert not heard.cut, heard.text
