"""The speech edges the silence and talk-over metrics use: VAD's 32 ms windows, sharpened to the millisecond
where the line is quiet. A known pause between two spoken sentences is measured to within a few ms, where
VAD's own edges were tens of ms off; over background noise VAD's edges are kept."""

from __future__ import annotations

import numpy as np
import pytest

from agents.voice import needs_voice

pytestmark = [pytest.mark.audio, needs_voice]


async def test_a_known_pause_is_measured_to_the_millisecond_on_a_quiet_line() -> None:
    from tamesu.audio import metrics, noise, tts, vad
    from tamesu.audio.clip import Clip

    def voiced(clip: Clip) -> np.ndarray:  # from the first sample louder than -41 dBFS to the last
        loud = np.flatnonzero(np.abs(clip.samples.astype(np.int32)) > 300)
        return clip.samples[loud[0]:loud[-1] + 1]

    first, _ = await tts.say("Tonight we have a tomato and basil soup.", None)
    second, _ = await tts.say("Every dish is made fresh in our kitchen each day.", None)
    a, b = voiced(first.at(16000)), voiced(second.at(16000))
    worst_vad = worst_sharp = 0.0
    for pause_ms in (700, 1000, 1500):
        for lead_ms in (0, 7, 250):
            track = np.concatenate([np.zeros(lead_ms * 16, np.int16), a, np.zeros(pause_ms * 16, np.int16), b,
                                    np.zeros(8000, np.int16)])
            clip = Clip(track, 16000)
            found = vad.segments(clip)
            assert len(found) == 2, found
            sharp = metrics.sharpened(clip, found)
            worst_vad = max(worst_vad, abs(found[1][0] - found[0][1] - pause_ms))
            worst_sharp = max(worst_sharp, abs(sharp[1][0] - sharp[0][1] - pause_ms))
    assert worst_sharp <= 5, worst_sharp
    assert worst_vad > 10  # what the sharpening is for (measured: up to 68 ms with Piper)
    # over cafe noise at -12 dB the edges stay VAD's: the noise is louder than the edge threshold
    noisy = noise.mix(Clip(np.concatenate([a, np.zeros(16000, np.int16), b]), 16000), "cafe", -12, 3)
    found = vad.segments(noisy)
    assert metrics.sharpened(noisy, found) == found


async def test_a_soft_onset_far_before_vads_window_is_followed_to_its_start() -> None:
    """"For how many people" begins with an "f" that VAD hears 65-90 ms late (where its 32 ms windows fall
    decides how late): the edge was looked for only 64 ms back, so a pause before it measured up to 27 ms long
    (seen as G.711's steady offset against the realtime agent's clock). Over mu-law 8 kHz as on a phone line."""
    from tamesu.audio import metrics, tts, vad, voices
    from tamesu.audio.clip import Clip
    from tamesu.audio.formats import AudioFormat

    if voices.find("espeak:en-us") is None:
        pytest.skip("espeak-ng is not installed")

    def voiced(clip: Clip) -> np.ndarray:
        loud = np.flatnonzero(np.abs(clip.samples.astype(np.int32)) > 300)
        return clip.samples[loud[0]:loud[-1] + 1]

    first, _ = await tts.say("Of course.", "espeak:en-us")
    second, _ = await tts.say("For how many people, and on which day?", "espeak:en-us")
    errors = []
    for fmt in (AudioFormat("pcm16", 24000), AudioFormat("mulaw", 8000)):
        line = [Clip.from_wire(Clip(voiced(c), c.rate).wire(fmt), fmt).at(16000) for c in (first, second)]
        a, b = voiced(line[0]), voiced(line[1])  # the pause on the line, as the agent's own clock has it
        for pause_ms in (1500, 3500):
            for lead_ms in (0, 9, 18, 27, 250):
                track = np.concatenate([np.zeros(lead_ms * 16, np.int16), a, np.zeros(pause_ms * 16, np.int16),
                                        b, np.zeros(8000, np.int16)])
                clip = Clip(track, 16000)
                sharp = metrics.sharpened(clip, vad.segments(clip))
                assert len(sharp) == 2, sharp
                errors.append(round(sharp[1][0] - sharp[0][1] - pause_ms, 1))
    assert max(abs(e) for e in errors) <= 5, errors


def test_a_dropout_after_the_first_sound_does_not_start_the_speech_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference bot's 8 kHz lines send a reply's first 95 ms, then nothing for 25-75 ms (their resampler
    gives out audio in blocks): VAD put the start after the dropout, 80 ms into the speech that resumed, and the
    wait before the reply measured 124-135 ms longer than the bot's clock had it (twilio, two calls in three).
    The start is walked back over the dropout to the first sound; a longer run of digital silence (a pause the
    agent made) still ends the speech."""
    from tamesu.audio import metrics
    from tamesu.audio.clip import Clip

    rng = np.random.default_rng(7)

    def speech(ms: int) -> np.ndarray:
        return (rng.standard_normal(ms * 16) * 3000).astype(np.int16)

    def start(gap_ms: int) -> float:
        track = np.concatenate([np.zeros(16000, np.int16), speech(95), np.zeros(gap_ms * 16, np.int16), speech(600),
                                np.zeros(8000, np.int16)])
        resumed = 1000 + 95 + gap_ms
        return metrics.sharpened(Clip(track, 16000), [(resumed + 80.0, resumed + 600.0)])[0][0]

    assert [start(gap) for gap in (25, 38, 75)] == [1000.0, 1000.0, 1000.0]
    assert start(150) == 1245.0  # 150 ms of nothing is a pause: the speech starts after it
    # the speech after the dropout can start softly: 30 ms of it, then 40 ms under the edge threshold (in "I can")
    soft = (rng.standard_normal(40 * 16) * 20).astype(np.int16)
    track = np.concatenate([np.zeros(16000, np.int16), speech(95), np.zeros(31 * 16, np.int16), speech(30), soft,
                            speech(600), np.zeros(8000, np.int16)])
    assert metrics.sharpened(Clip(track, 16000), [(1196.0 + 40, 1796.0)])[0][0] == 1000.0
    monkeypatch.setattr(metrics, "EDGE_DROPOUT_MS", 0)
    assert start(38) == 1133.0  # what the walk over a dropout is for: it stopped at the dropout
    assert metrics.sharpened(Clip(track, 16000), [(1196.0 + 40, 1796.0)])[0][0] == 1196.0
