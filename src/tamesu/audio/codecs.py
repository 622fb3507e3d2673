"""pcm16 and G.711 (mu-law, A-law) through `audioop`, the library the ecosystem converts G.711 with (pipecat too):
the standard library's in Python 3.11 and 3.12, the `audioop-lts` package (the same module, kept) from 3.13.

Samples are numpy int16 arrays; wire audio is bytes (pcm16 little-endian, or one G.711 byte per sample).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from tamesu.audio.formats import AudioFormat, Encoding

with warnings.catch_warnings():
    # 3.11 and 3.12 warn at import that audioop leaves the standard library in 3.13; from 3.13 the `audioop-lts`
    # dependency provides it, so the warning asks nothing of tamesu (and would be every user's noise)
    warnings.filterwarnings("ignore", message=".*audioop.*", category=DeprecationWarning)
    import audioop

_NATIVE = "<i2" if sys.byteorder == "little" else ">i2"
"""audioop reads and writes samples in the machine's byte order; the wire's pcm16 is little-endian."""


def encode(samples: np.ndarray, encoding: Encoding) -> bytes:
    """int16 samples as wire bytes."""
    if encoding == "pcm16":
        return samples.astype("<i2").tobytes()
    linear = samples.astype(_NATIVE).tobytes()
    return audioop.lin2ulaw(linear, 2) if encoding == "mulaw" else audioop.lin2alaw(linear, 2)


def decode(data: bytes, encoding: Encoding) -> np.ndarray:
    """Wire bytes as int16 samples. pcm16 of an odd length is an error the caller reports."""
    if encoding == "pcm16":
        if len(data) % 2:
            raise ValueError(f"pcm16 audio of {len(data)} bytes (an odd length): not 16-bit samples")
        return np.frombuffer(data, dtype="<i2").astype(np.int16)
    linear = audioop.ulaw2lin(data, 2) if encoding == "mulaw" else audioop.alaw2lin(data, 2)
    return np.frombuffer(linear, dtype=_NATIVE).astype(np.int16)


def convert(data: bytes, source: AudioFormat, target: AudioFormat) -> bytes:
    """Wire audio of one format as another (encoding and rate)."""
    from tamesu.audio.resample import resample

    samples = decode(data, source.encoding)
    return encode(resample(samples, source.rate, target.rate), target.encoding)
