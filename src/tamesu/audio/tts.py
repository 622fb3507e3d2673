"""The simulated user speaks: text to a Clip with the persona's voice.

Piper voices are loaded once per process (a load is 0.3-0.6 s) and shared; synthesis runs in the speech
worker process (`tamesu.audio.pool`: Piper holds the GIL long enough to make every conversation's frames
late), where each voice is loaded once per run, so a conversation's pacing and the others keep going.
espeak-ng is the fallback, run as a process per utterance with a timeout. Nothing is downloaded: Piper gets
the voice file a package ships.

Piper speaks without its generator and duration noise: with the voice's defaults the same sentence comes out
differently each time (a different length, and Whisper heard "for two on Friday" in one take and "for two and
Friday" in the next), so a voice test would pass or fail by chance. Without the noise a text is one recording.

So a text is synthesised once per run, voice and rate, by either engine (`say` keeps the recordings, bounded in
bytes, and conversations asking for the same text at once share one synthesis: `tamesu.audio._kept`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import threading
import wave
from typing import Any

import numpy as np

from tamesu.audio import pool, voices
from tamesu.audio._kept import Kept, Tally
from tamesu.audio.clip import Clip
from tamesu.audio.voices import Voice

SYNTHESIS_TIMEOUT_S = 30.0
ESPEAK_WPM = 175
"""espeak-ng's own default pace, in words per minute: a speaking rate scales it."""
_loaded: dict[str, object] = {}
_load_lock = threading.Lock()
_run_lock = threading.Lock()
kept = Kept()
"""Every recording the run has made (and is making), by engine, voice, rate and text."""


class SpeechError(Exception):
    """No voice could say the text (no voice installed, espeak-ng failed)."""


def _piper(voice: Voice) -> Any:
    with _load_lock:
        if voice.ref not in _loaded:
            from piper import PiperVoice

            _loaded[voice.ref] = PiperVoice.load(voice.ref)
        return _loaded[voice.ref]


def piper_say(voice: Voice, text: str, rate: float = 1.0) -> Clip:
    from piper import SynthesisConfig

    model = _piper(voice)
    # the same text, the same audio (see above); the length scale is the inverse of the speaking rate
    repeatable = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.0 / rate)
    with _run_lock:  # one ONNX session per voice, shared: one utterance at a time keeps CPU use bounded
        chunks = list(model.synthesize(text, syn_config=repeatable))
    if not chunks:
        return Clip.silence(0, model.config.sample_rate)
    samples = np.concatenate([chunk.audio_int16_array for chunk in chunks]).astype(np.int16)
    return Clip(samples, chunks[0].sample_rate)


async def _espeak_say(voice: Voice, text: str, rate: float = 1.0) -> Clip:
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise SpeechError("espeak-ng is not installed")
    process = await asyncio.create_subprocess_exec(
        binary, "-v", voice.ref, "-s", str(round(ESPEAK_WPM * rate)), "--stdout", text,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), SYNTHESIS_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise SpeechError(f"espeak-ng took longer than {SYNTHESIS_TIMEOUT_S:g}s") from None
    except asyncio.CancelledError:  # words no longer wanted (a line synthesised ahead, then not said): no orphan
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        raise
    if process.returncode != 0:
        raise SpeechError(f"espeak-ng failed: {err.decode(errors='replace').strip()[:200]}")
    with wave.open(io.BytesIO(out)) as wav:
        sample_rate = wav.getframerate()
        frames = wav.readframes(wav.getnframes())
    return Clip(np.frombuffer(frames, dtype="<i2").astype(np.int16), sample_rate)


async def say(text: str, voice_name: str | None = None, rate: float = 1.0, *,
              tally: Tally | None = None) -> tuple[Clip, Voice]:
    """`text` spoken by the named voice (None: the default one), `rate` times its own pace: synthesised the first
    time the run asks for it, kept after (`tally` counts which it was)."""
    voice = voices.find(voice_name)
    if voice is None:
        raise SpeechError(voices.unknown_message(voice_name) if voice_name else "no voice is installed")
    piper = voice.engine == "piper"
    make = (lambda: pool.run("synthesise", piper_say, voice, text, rate)) if piper else (
        lambda: _espeak_say(voice, text, rate))
    return await kept.get((voice.engine, voice.ref, rate, text), make, tally), voice


def preload(voice_name: str | None = None) -> None:
    """Load a Piper voice now (benchmarks, session fixtures), so the first turn does not pay for it."""
    voice = voices.find(voice_name)
    if voice is not None and voice.engine == "piper":
        _piper(voice)


def warm(voice_name: str | None = None) -> None:
    """Start the synthesis worker and load a Piper voice in it now, in the background (`pool.warm`): a call
    does this as it opens, so the caller's first words are not held back by the load (the agent's greeting
    plays meanwhile)."""
    voice = voices.find(voice_name)
    if voice is not None and voice.engine == "piper":
        pool.warm("synthesise", "load_voice", voice_name)
