"""Background noises for `persona.behaviors.background_noise`, generated from a seed (nothing downloaded).

Each is a few lines of signal processing that sounds like its name on a phone line: `white`, `pink`,
`brown` (coloured noise), `hum` (mains hum with harmonics), `cafe` (a babble of band-limited voices-like
noise with a syllable rhythm and clinks), `street` (rumble with passing swells), `office` (air conditioning
with keyboard clicks). The noise is mixed into the user's speech at `level_db` relative to the speech's
loudness (-20 means 20 dB quieter than the voice).
"""

from __future__ import annotations

import numpy as np

from tamesu.audio.clip import Clip
from tamesu.suite.audio_names import NOISES as NAMES

DEFAULT_LEVEL_DB = -20.0
TYPICAL_SPEECH_RMS = 3000.0
"""The loudness noise is set against before the user has said anything (Piper's voice is about this loud)."""


def _coloured(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Noise whose power falls as 1/f**exponent (0 white, 1 pink, 2 brown)."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n)
    f[0] = f[1] if n > 1 else 1.0
    shaped = np.fft.irfft(spectrum / f ** (exponent / 2), n)
    return shaped / (np.std(shaped) or 1.0)


def _envelope(rng: np.random.Generator, n: int, rate: int, hz: float) -> np.ndarray:
    """A slow random loudness curve around `hz` changes per second, between 0.2 and 1."""
    points = max(2, int(n / rate * hz) + 2)
    knots = rng.uniform(0.2, 1.0, points)
    return np.interp(np.linspace(0, points - 1, n), np.arange(points), knots)


def _clicks(rng: np.random.Generator, n: int, rate: int, per_second: float, ms: float) -> np.ndarray:
    out = np.zeros(n)
    length = max(1, int(rate * ms / 1000))
    decay = np.exp(-np.linspace(0, 6, length))
    for start in rng.integers(0, max(1, n - length), int(n / rate * per_second)):
        out[start:start + length] += rng.standard_normal(length) * decay * rng.uniform(1, 3)
    return out


def generate(name: str, ms: float, rate: int, seed: int) -> Clip:
    """`ms` of the named noise at unit loudness (RMS 1 before scaling to int16 by `mix`)."""
    if name not in NAMES:
        raise ValueError(f"unknown background noise {name!r} (one of {', '.join(NAMES)})")
    rng = np.random.default_rng(seed)
    n = max(1, int(rate * ms / 1000))
    t = np.arange(n) / rate
    if name == "white":
        signal = rng.standard_normal(n)
    elif name == "pink":
        signal = _coloured(rng, n, 1.0)
    elif name == "brown":
        signal = _coloured(rng, n, 2.0)
    elif name == "hum":
        signal = sum(np.sin(2 * np.pi * 50 * k * t + rng.uniform(0, np.pi)) / k for k in (1, 2, 3, 5))
    elif name == "cafe":
        voices = sum(_coloured(rng, n, 1.0) * _envelope(rng, n, rate, 4.0) for _ in range(4))
        signal = voices + 0.5 * _clicks(rng, n, rate, 0.7, 30)
    elif name == "street":
        signal = _coloured(rng, n, 2.0) * _envelope(rng, n, rate, 0.3) + 0.2 * _coloured(rng, n, 1.0)
    else:  # office
        signal = 0.6 * _coloured(rng, n, 1.5) + 0.6 * _clicks(rng, n, rate, 6.0, 8)
    signal = np.asarray(signal, dtype=np.float64)
    rms = float(np.sqrt(np.mean(signal**2))) or 1.0
    return Clip((signal / rms).astype(np.float32), rate)


def speech_rms(speech: Clip) -> float:
    """The loudness of the speech in `speech` (its quiet stretches left out), 0.0 for silence."""
    voice = speech.samples.astype(np.float64)
    loud = voice[np.abs(voice) > 0.05 * (np.abs(voice).max() if voice.size else 1)]
    return float(np.sqrt(np.mean(loud**2))) if loud.size else 0.0


def gained(clip: Clip, db: float) -> Clip:
    """`clip` `db` louder (quieter when negative), clipped to int16."""
    if db == 0:
        return clip
    louder = np.round(clip.samples.astype(np.float64) * 10 ** (db / 20))
    return Clip(np.clip(louder, -32768, 32767).astype(np.int16), clip.rate)


def mix(speech: Clip, name: str, level_db: float, seed: int) -> Clip:
    """`speech` with the noise under it at `level_db` relative to the speech's loudness."""
    if speech.samples.size == 0:
        return speech
    voice = speech.samples.astype(np.float64)
    speech_level = speech_rms(speech) or 1000.0
    noise = generate(name, speech.duration_ms, speech.rate, seed).samples.astype(np.float64)
    noise = noise[: voice.size] if noise.size >= voice.size else np.pad(noise, (0, voice.size - noise.size))
    mixed = voice + noise * speech_level * 10 ** (level_db / 20)
    return Clip(np.clip(np.round(mixed), -32768, 32767).astype(np.int16), speech.rate)
