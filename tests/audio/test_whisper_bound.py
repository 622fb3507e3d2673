"""Whisper's decoding is bounded by the clip's length (`stt.token_bound`): greedy decoding at temperature 0 can loop
on a phrase, and every call that had such a reply waited for the loop after it was over. The words of real speech,
however fast, come well within the bound."""

from __future__ import annotations

import gzip
from pathlib import Path

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
