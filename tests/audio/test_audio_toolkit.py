"""The audio toolkit's parts, each against something independent: G.711 against the ITU's rules, resampling
against a tone's frequency, noise against the level asked for, VAD and Whisper against speech the TTS made with
known silences, and the metrics against hand-built timelines."""

from __future__ import annotations

import asyncio
import importlib.util
import time
import wave
from pathlib import Path

import pytest

from agents.voice import needs_voice

pytestmark = [pytest.mark.audio, needs_voice]

if importlib.util.find_spec("numpy") is not None:
    import numpy as np


def _tone(freq: float, ms: float, rate: int, amplitude: float = 8000) -> np.ndarray:
    t = np.arange(int(rate * ms / 1000)) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def _peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[int(np.argmax(spectrum))])


def _itu_mulaw(pcm16: np.ndarray) -> np.ndarray:
    """G.711 mu-law by the ITU's rules, written from them here (independent of the library tamesu encodes with):
    14 significant bits, the bias 33, the segment the biased magnitude falls in, then its four mantissa bits."""
    pcm = pcm16.astype(np.int32) >> 2
    magnitude = np.minimum(np.abs(pcm), 8159) + 33
    segment = np.searchsorted(np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF]), magnitude)
    code = np.where(segment > 7, 0x7F, (segment << 4) | ((magnitude >> (segment + 1)) & 0x0F))  # past the top: its end
    return (code ^ np.where(pcm < 0, 0x7F, 0xFF)).astype(np.uint8)


def _itu_alaw(pcm16: np.ndarray) -> np.ndarray:
    """G.711 A-law by the ITU's rules: 13 significant bits, the segment, four mantissa bits, even bits inverted."""
    pcm = pcm16.astype(np.int32) >> 3
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)
    segment = np.searchsorted(np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF]), magnitude)
    code = (segment << 4) | ((magnitude >> np.maximum(segment, 1)) & 0x0F)
    return (code ^ np.where(pcm >= 0, 0xD5, 0x55)).astype(np.uint8)


def _itu_expanded(codes: np.ndarray, law: str) -> np.ndarray:
    """Each code's decision value back as 16-bit PCM: the middle of the step it stands for."""
    if law == "mulaw":
        u = ~codes.astype(np.int32) & 0xFF
        magnitude = ((((u & 0x0F) << 3) + 0x84) << ((u >> 4) & 7)) - 0x84
        return np.where(u & 0x80, -magnitude, magnitude)
    a = codes.astype(np.int32) ^ 0x55
    segment, mantissa = (a >> 4) & 7, (a & 0x0F) << 4
    magnitude = np.where(segment == 0, mantissa + 8, (mantissa + 0x108) << np.maximum(segment - 1, 0))
    return np.where(a & 0x80, magnitude, -magnitude)


def test_g711_follows_the_itu_rules_for_every_sample() -> None:
    """tamesu's G.711 is a library's (audioop): checked against the ITU's rules, every 16-bit sample and every
    code, and the ends of the tables the standard prints."""
    from tamesu.audio import codecs

    every = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)
    assert codecs.encode(every, "mulaw") == _itu_mulaw(every).tobytes()
    assert codecs.encode(every, "alaw") == _itu_alaw(every).tobytes()
    codes = np.arange(256, dtype=np.uint8)
    for law in ("mulaw", "alaw"):
        assert (codecs.decode(codes.tobytes(), law) == _itu_expanded(codes, law)).all(), law  # type: ignore[arg-type]
    # silence, and full scale either way
    assert codecs.encode(np.array([0, 32767, -32768], dtype=np.int16), "mulaw") == b"\xff\x80\x00"
    assert codecs.encode(np.array([0, 32767, -32768], dtype=np.int16), "alaw") == b"\xd5\xaa\x2a"
    assert codecs.decode(b"\x80\x00", "mulaw").tolist() == [32124, -32124]
    assert codecs.decode(b"\xaa\x2a", "alaw").tolist() == [32256, -32256]


def test_a_round_trip_through_g711_keeps_the_signal() -> None:
    from tamesu.audio import codecs

    tone = _tone(440, 200, 8000)
    for encoding in ("mulaw", "alaw"):
        back = codecs.decode(codecs.encode(tone, encoding), encoding).astype(np.float64)
        snr = 10 * np.log10(np.sum(tone.astype(np.float64) ** 2) / np.sum((back - tone) ** 2))
        assert snr > 30, (encoding, snr)
    with pytest.raises(ValueError, match="odd length"):
        codecs.decode(b"\x00\x01\x02", "pcm16")


@pytest.mark.parametrize(("source", "target"), [(24000, 16000), (8000, 16000), (22050, 8000), (16000, 24000)])
def test_resampling_keeps_length_and_pitch(source: int, target: int) -> None:
    from tamesu.audio.resample import resample

    out = resample(_tone(440, 500, source), source, target)
    assert abs(out.size - target // 2) <= 1
    assert abs(_peak_hz(out, target) - 440) < 5


def test_downsampling_removes_what_the_new_rate_cannot_hold() -> None:
    from tamesu.audio.resample import resample

    # 6 kHz cannot exist at 8 kHz: it must be attenuated, not folded down to 2 kHz at full strength
    out = resample(_tone(6000, 500, 24000), 24000, 8000)
    assert np.sqrt(np.mean(out.astype(np.float64) ** 2)) < 0.3 * 8000 / np.sqrt(2)


def test_frames_are_20_ms_and_the_last_is_padded() -> None:
    from tamesu.audio.formats import AudioFormat, frames

    assert AudioFormat("pcm16", 24000).frame_bytes() == 960
    assert AudioFormat("mulaw", 8000).frame_bytes() == 160
    cut = frames(b"\x01" * 1000, AudioFormat("mulaw", 8000))
    assert [len(f) for f in cut] == [160] * 7
    assert cut[-1].endswith(b"\xff" * 120)  # mu-law silence


def test_the_pacer_sends_at_a_callers_pace() -> None:
    from tamesu.audio.pacing import Pacer

    sent: list[float] = []

    async def send(_frame: bytes) -> None:
        sent.append(time.monotonic())

    before = time.monotonic()
    asyncio.run(Pacer().stream([b"x"] * 11, send))
    # never early: frame k leaves no sooner than k * 20 ms after the stream began. Not after the first frame:
    # slots are counted from the start, so a first frame sent a few ms late (the thread was preempted on a
    # loaded machine) makes the second come less than 20 ms after it, and that is right
    assert all(sent[k] - before >= k * 0.020 - 0.002 for k in range(11)), [round(t - before, 4) for t in sent]


def test_the_playback_clock_does_not_credit_a_burst_with_early_speech() -> None:
    from tamesu.audio.pacing import PlaybackClock

    clock = PlaybackClock()
    starts = [clock.place(1000.0, 500.0) for _ in range(4)]  # 2 s of audio arriving at once
    assert starts == [1000.0, 1500.0, 2000.0, 2500.0]
    assert clock.place(4000.0, 100.0) == 4000.0  # after a pause it plays on arrival
    assert clock.flush(4050.0) == 50.0 and not clock.playing_at(4060.0)


def test_word_error_rate_normalises_numbers_and_punctuation() -> None:
    from tamesu.audio.wer import errors, normalise, word_error_rate

    assert " ".join(normalise("A table for 2 at 7pm, on Friday!")) == "a table for two at seven pm on friday"
    assert " ".join(normalise("1,250 guests at 7 p.m.")) == "one thousand two hundred fifty guests at seven pm"
    assert errors("book a table for two", "book the table for two please") == (2, 5)
    assert word_error_rate([("one two three", "one two three"), ("four five", "four")]) == 0.2
    assert word_error_rate([]) is None


def test_noise_is_mixed_at_the_level_asked_and_repeats_with_its_seed() -> None:
    from tamesu.audio import noise
    from tamesu.audio.clip import Clip

    speech = Clip(_tone(300, 1000, 16000, 6000), 16000)
    for name in noise.NAMES:
        mixed = noise.mix(speech, name, -20.0, seed=7)
        added = mixed.samples.astype(np.float64) - speech.samples
        level = 20 * np.log10(np.sqrt(np.mean(added**2)) / np.sqrt(np.mean(speech.samples.astype(np.float64) ** 2)))
        assert abs(level + 20) < 1.5, (name, level)
        assert np.array_equal(mixed.samples, noise.mix(speech, name, -20.0, seed=7).samples)
    assert not np.array_equal(noise.mix(speech, "cafe", -20, 1).samples, noise.mix(speech, "cafe", -20, 2).samples)


def test_behaviours_repeat_with_the_run_seed() -> None:
    from tamesu.audio.behaviors import Behaviour
    from tamesu.suite.schema import Behaviors

    spec = Behaviors.model_validate({"interrupt_probability": 0.5, "silence_after_turn_ms": [300, 1500]})
    first, again, other = Behaviour(spec, 11), Behaviour(spec, 11), Behaviour(spec, 12)
    draws = [(first.interrupts(), first.silence_ms()) for _ in range(20)]
    assert draws == [(again.interrupts(), again.silence_ms()) for _ in range(20)]
    assert draws != [(other.interrupts(), other.silence_ms()) for _ in range(20)]
    assert all(300 <= s <= 1500 for _, s in draws)
    interrupted = [i for i, _ in draws if i is not None]
    assert 0 < len(interrupted) < 20 and all(300 <= i <= 1200 for i in interrupted)
    never = Behaviour(Behaviors(), 1)
    assert never.interrupts() is None and never.silence_ms() == 0.0


def test_voices_are_the_installed_ones() -> None:
    from tamesu.audio import voices

    names = voices.names()
    assert names, "no voice installed"
    assert voices.find("no-such-voice") is None
    message = voices.unknown_message("no-such-voice")
    assert "no-such-voice" in message and names[0] in message
    if voices.find("en_US-joe-medium") is not None:
        assert voices.find("joe") == voices.find("en_US-joe-medium")
        assert voices.default() == voices.find("en_US-joe-medium")
    if voices.find("espeak:en-gb") is not None:
        assert voices.find("en-GB-female").ref == "en-gb+f3"


def test_a_sentence_is_spoken_the_same_every_time() -> None:
    """Piper with its default noise says a sentence differently each take (Whisper heard "two on Friday",
    then "two and Friday"): a voice test would pass or fail by chance. One text is one recording."""
    from tamesu.audio import tts

    text = "Press 2 for billing, or stay on the line."
    voice = tts.voices.default()
    assert voice is not None and voice.engine == "piper", voice
    first, again = tts.piper_say(voice, text), tts.piper_say(voice, text)  # two syntheses (`say` keeps one)
    assert first.rate == again.rate and first.samples.size > first.rate // 2, voice
    assert np.array_equal(first.samples, again.samples), (first.duration_ms, again.duration_ms)


def test_a_text_is_synthesised_once_for_every_caller_that_says_it() -> None:
    """16 callers of a load test say the same script: one synthesis each text (and rate), shared by callers
    asking at once, read-only so that no caller's gain or noise changes another's."""
    from tamesu.audio import tts

    async def main() -> list[tuple[object, object]]:
        together = await asyncio.gather(*(tts.say("Table for two on Friday, please.") for _ in range(4)))
        later = await tts.say("Table for two on Friday, please.")
        faster = await tts.say("Table for two on Friday, please.", rate=1.3)
        return [*together, later, faster]

    said = [clip for clip, _voice in asyncio.run(main())]
    assert all(clip is said[0] for clip in said[:5])
    assert said[5] is not said[0] and said[5].samples.size < said[0].samples.size  # another rate, another take
    with pytest.raises(ValueError):
        said[0].samples[0] = 1


def test_speech_is_found_where_it_was_put_and_understood() -> None:
    """The TTS speaks, silences are put around it: VAD finds the speech where it is, Whisper hears the words,
    and the espeak fallback is understood too."""
    from tamesu.audio import stt, tts, vad, wer
    from tamesu.audio.clip import Clip

    text = "I would like a table for two on Friday."
    for voice in (None, "espeak:en-us"):
        if voice is not None and tts.voices.find(voice) is None:
            continue
        spoken, _ = asyncio.run(tts.say(text, voice))
        clip = spoken.at(16000).padded(1000, 1500)
        found = vad.segments(clip)
        assert len(found) == 1, found
        start, end = found[0]
        assert 850 <= start <= 1250 and abs(end - (1000 + spoken.duration_ms)) < 400, (found, spoken.duration_ms)
        heard = stt.transcribe(clip)
        assert wer.word_error_rate([(text, heard.text)]) <= 0.2, heard.text
        # a phone line: 8 kHz mu-law and back, then Whisper resamples it to 16 kHz
        from tamesu.audio.formats import AudioFormat

        phone = AudioFormat("mulaw", 8000)
        assert wer.word_error_rate([(text, stt.transcribe(Clip.from_wire(clip.wire(phone), phone)).text)]) <= 0.3
    assert vad.segments(Clip.silence(2000, 16000)) == []


def test_vad_needs_nothing_but_the_voice_extra() -> None:
    """One `pip install 'tamesu[voice]'`: Silero's ONNX file is faster-whisper's, and the VAD runs in a
    process where the `silero_vad` package cannot be imported at all."""
    import subprocess
    import sys

    from tamesu.audio import vad

    assert vad.model_file().is_file() and vad.model_file().parent.name == "assets"
    code = (
        "import sys; sys.modules['silero_vad'] = None\n"
        "import asyncio\n"
        "from tamesu.audio import tts, vad, extra\n"
        "assert extra.missing() == [], extra.missing()\n"
        "spoken, _ = asyncio.run(tts.say('Hello there, good evening'))\n"
        "print(vad.segments(spoken.at(16000).padded(1000, 1000)))\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": src, "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = eval(done.stdout.strip())  # a list of (start, end) tuples printed by the child
    assert len(found) >= 1 and 850 <= found[0][0] <= 1250, found


def test_the_streaming_vad_says_when_speech_starts_and_stops() -> None:
    from tamesu.audio import tts
    from tamesu.audio.vad import StreamingVad

    spoken, _ = asyncio.run(tts.say("Hello there, good evening"))
    clip = spoken.at(16000).padded(500, 1200)
    detector = StreamingVad(silence_ms=400)
    events = []
    for i in range(0, clip.samples.size, 320):  # 20 ms at a time, as a call delivers it
        events += detector.feed(clip.samples[i:i + 320])
    assert [kind for kind, _ in events] == ["started", "stopped"]
    assert 350 <= events[0][1] <= 800 and events[1][1] > events[0][1] + 800


def test_the_recorder_writes_both_sides_on_one_timeline(tmp_path: Path) -> None:
    from tamesu.audio.clip import Clip
    from tamesu.audio.recorder import Recorder

    recorder = Recorder()
    recorder.user(Clip(_tone(300, 500, 24000), 24000), 0.0)
    recorder.agent(Clip(_tone(700, 500, 8000), 8000), 1000.0)
    recorder.agent(Clip(_tone(700, 500, 16000), 16000), 1500.0)
    recorder.cut_agent(1750.0)
    recorder.write(tmp_path / "audio.wav")
    with wave.open(str(tmp_path / "audio.wav")) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 16000, 2)
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    user, agent = data[:, 0], data[:, 1]
    ms = 16  # samples per ms
    assert np.abs(user[: 500 * ms]).max() > 5000 and np.abs(user[600 * ms:]).max() == 0
    assert np.abs(agent[: 1000 * ms]).max() == 0 and np.abs(agent[1000 * ms:1750 * ms]).max() > 5000
    assert agent.size == 1750 * ms  # what the barge-in flushed was never heard: the recording ends there
    assert abs(_peak_hz(agent[1000 * ms:1500 * ms], 16000) - 700) < 5


def test_the_metrics_on_a_hand_built_timeline() -> None:
    from tamesu.audio.metrics import _longest_gap, overlap

    user = [(0.0, 1000.0), (2500.0, 3000.0)]
    agent = [(1800.0, 2700.0), (2900.0, 3500.0)]
    assert overlap(user, agent) == 300.0  # 2500-2700 and 2900-3000
    # a reply expected from 1000: silence until 1800, then speech without a gap to 3500
    assert _longest_gap((1000.0, 3500.0), sorted(user + agent)) == 800.0
    assert _longest_gap((3500.0, 5000.0), sorted(user + agent)) == 1500.0
