"""VAD after a long stretch of digital silence: a recording has zeros wherever no audio came (a phone agent
thinking for seconds), and Silero's state, carried through them, drifted so that a narrowband reply after them
scored 0.1-0.5 and went unheard (silence_gap_max_ms then ran to the agent's next sentence). Each stretch of
sound is now read from a fresh state."""

from __future__ import annotations

import numpy as np
import pytest

from agents.voice import needs_voice

pytestmark = [pytest.mark.audio, needs_voice]


def _phone_band(samples: np.ndarray) -> np.ndarray:
    """16 kHz speech through a sharp 3.4 kHz low-pass, as a line's codec and resampler leave it."""
    n = np.arange(255) - 127
    kernel = 2 * 3400 / 16000 * np.sinc(2 * 3400 / 16000 * n) * np.blackman(255)
    out = np.convolve(samples.astype(np.float64), kernel / kernel.sum(), mode="same")
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


async def test_a_narrowband_reply_after_seconds_of_digital_silence_is_heard_from_its_start() -> None:
    from tamesu.audio import metrics, tts, vad
    from tamesu.audio.clip import Clip

    greeting, _ = await tts.say("Hello.", None)
    reply, _ = await tts.say("I can book a table for you.", None)
    a, b = _phone_band(greeting.at(16000).samples), _phone_band(reply.at(16000).samples)
    loud = np.flatnonzero(np.abs(b.astype(np.int32)) > 300)
    b = b[loud[0]:loud[-1] + 1]
    for silence_s in (2, 12, 24):
        start_ms = 500 + a.size / 16 + silence_s * 1000
        track = np.concatenate([np.zeros(8000, np.int16), a, np.zeros(silence_s * 16000, np.int16), b,
                                np.zeros(8000, np.int16)])
        found = metrics.speech(Clip(track, 16000))
        assert len(found) == 2, (silence_s, found)
        assert abs(found[1][0] - start_ms) <= 5, (silence_s, found[1], start_ms)
        assert abs(found[1][1] - (start_ms + b.size / 16)) <= 5, (silence_s, found[1], start_ms + b.size / 16)
    # the digital silence is no speech, and a window of it in the middle of speech is never one
    assert vad.probabilities(Clip(np.zeros(16000, np.int16), 16000)).max() == 0
