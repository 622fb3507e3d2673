"""pcm16 and G.711 (mu-law, A-law), written here: `audioop` is deprecated in 3.11 and gone in 3.13.

Samples are numpy int16 arrays; wire audio is bytes (pcm16 little-endian, or one G.711 byte per sample).
The G.711 encoders follow ITU-T G.711 as the reference C implementation computes it (segment search, then
the mantissa), and the decoders are 256-entry tables built from the same rules.
"""

from __future__ import annotations

import numpy as np

from tamesu.audio.formats import AudioFormat, Encoding

_MULAW_BIAS = 0x84
_MULAW_CLIP = 8159  # of the 14-bit magnitude
_MULAW_SEGMENT_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)


def mulaw_encode(samples: np.ndarray) -> bytes:
    pcm = samples.astype(np.int32) >> 2  # 14 significant bits
    negative = pcm < 0
    mask = np.where(negative, 0x7F, 0xFF)
    pcm = np.minimum(np.where(negative, -pcm, pcm), _MULAW_CLIP) + (_MULAW_BIAS >> 2)
    segment = np.searchsorted(_MULAW_SEGMENT_ENDS, pcm, side="left")
    value = (np.minimum(segment, 7) << 4) | ((pcm >> (segment + 1)) & 0x0F)
    value = np.where(segment >= 8, 0x7F, value)
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


def _mulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    magnitude = (((u & 0x0F) << 3) + _MULAW_BIAS) << exponent
    linear = magnitude - _MULAW_BIAS
    return np.where(u & 0x80, -linear, linear).astype(np.int16)


_ALAW_SEGMENT_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)


def alaw_encode(samples: np.ndarray) -> bytes:
    pcm = samples.astype(np.int32) >> 3  # 13 significant bits
    positive = pcm >= 0
    mask = np.where(positive, 0xD5, 0x55)
    pcm = np.where(positive, pcm, -pcm - 1)
    segment = np.searchsorted(_ALAW_SEGMENT_ENDS, pcm, side="left")
    shift = np.where(segment < 2, 1, segment)
    value = (np.minimum(segment, 7) << 4) | ((pcm >> shift) & 0x0F)
    value = np.where(segment >= 8, 0x7F, value)
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


def _alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    segment = (a & 0x70) >> 4
    t = np.where(segment == 0, t + 8, t + 0x108)
    t = np.where(segment > 1, t << np.maximum(segment - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


_DECODE = {"mulaw": _mulaw_table(), "alaw": _alaw_table()}


def encode(samples: np.ndarray, encoding: Encoding) -> bytes:
    """int16 samples as wire bytes."""
    if encoding == "pcm16":
        return samples.astype("<i2").tobytes()
    if encoding == "mulaw":
        return mulaw_encode(samples)
    return alaw_encode(samples)


def decode(data: bytes, encoding: Encoding) -> np.ndarray:
    """Wire bytes as int16 samples. pcm16 of an odd length is an error the caller reports."""
    if encoding == "pcm16":
        if len(data) % 2:
            raise ValueError(f"pcm16 audio of {len(data)} bytes (an odd length): not 16-bit samples")
        return np.frombuffer(data, dtype="<i2").astype(np.int16)
    return _DECODE[encoding][np.frombuffer(data, dtype=np.uint8)]


def convert(data: bytes, source: AudioFormat, target: AudioFormat) -> bytes:
    """Wire audio of one format as another (encoding and rate)."""
    from tamesu.audio.resample import resample

    samples = decode(data, source.encoding)
    return encode(resample(samples, source.rate, target.rate), target.encoding)
