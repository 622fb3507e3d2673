"""How loud a piece of audio is, and whether that is speech: the audio targets end an agent's turn by the
silence after its speech, and all of them judge a chunk the same way."""

from __future__ import annotations

import numpy as np

SPEECH_RMS = 300.0
"""A chunk of pcm16 louder than this (RMS) is someone speaking; a quiet phone line is far below it."""


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if samples.size else 0.0


def pcm16(data: bytes) -> np.ndarray:
    """Little-endian pcm16 bytes as samples (an odd trailing byte dropped)."""
    return np.frombuffer(data[: len(data) // 2 * 2], "<i2").astype(np.int16)


def is_speech(data: bytes) -> bool:
    return rms(pcm16(data)) > SPEECH_RMS


def _loud(data: bytes) -> np.ndarray:
    """The indexes of the samples louder than the speech level."""
    return np.flatnonzero(np.abs(pcm16(data).astype(np.int32)) > SPEECH_RMS)


def sounds(data: bytes) -> bool:
    """Whether any sample is louder than the speech level: where `first_sound` would start a reply."""
    return bool(_loud(data).size)


DIGITAL_SILENCE = 8
"""The loudest sample of a chunk that is no sound at all: a line's digital silence (G.711's silence code decodes
to 0 or 8), as VAD tells it (docs/voice.md). A voice's faint tail (Piper's last 100 ms, -60 dBFS) is above it."""


def audible(samples: np.ndarray) -> bool:
    """Whether a chunk holds any sound at all (a TTS voice's soft lead-in does; a line's digital silence does
    not): where an agent's reply starts, as the agent's own clock puts its first frame."""
    return bool(samples.size) and int(np.abs(samples.astype(np.int32)).max()) > DIGITAL_SILENCE


def first_sound(data: bytes) -> int:
    """The index of the first sample louder than the speech level (0 when none is): where a reply starts in a
    chunk of a line that carries its silence too (a SIP call's 100 ms chunks)."""
    loud = _loud(data)
    return int(loud[0]) if loud.size else 0
