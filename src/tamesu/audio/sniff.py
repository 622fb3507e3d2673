"""Which encoding a stretch of wire audio is most likely in, so a wrong `encoding` is named instead of heard as
noise. pcm16 bytes decoded as G.711 are close to white noise (the mean step as large as the mean level), where
speech is smooth. G.711 bytes read as pcm16 put both bytes of every sample at full scale, so most samples are
louder than speech ever is. (mu-law and A-law read as each other both sound like speech: not told apart.)"""

from __future__ import annotations

import numpy as np

from tamesu.audio.codecs import decode
from tamesu.audio.formats import Encoding

ENCODINGS: tuple[Encoding, ...] = ("pcm16", "mulaw", "alaw")
NOISE_ROUGHNESS = 0.9
"""Mean |step| / mean |level| above this is noise-like (white noise is about 1.1; speech is well below 0.6)."""


LOUD = 20000
LOUD_SHARE = 0.25
"""Speech has few samples above LOUD; G.711 read as pcm16 has about half of them there."""


def roughness(samples: np.ndarray) -> float:
    values = samples.astype(np.float64)
    level = float(np.mean(np.abs(values)))
    if level < 50:  # near silence says nothing about the codec
        return 0.0
    return float(np.mean(np.abs(np.diff(values)))) / level


def likely_encoding(data: bytes, agreed: Encoding) -> Encoding | None:
    """Another encoding when the audio is noise in the agreed one and smooth in that one; else None."""
    if agreed == "pcm16":
        samples = decode(data[: len(data) // 2 * 2], "pcm16")
        if samples.size == 0 or float(np.mean(np.abs(samples.astype(np.int32)) > LOUD)) < LOUD_SHARE:
            return None
    elif roughness(decode(data, agreed)) <= NOISE_ROUGHNESS:
        return None
    scores: dict[Encoding, float] = {}
    for encoding in ENCODINGS:
        if encoding == agreed:
            continue
        usable = data[: len(data) // 2 * 2] if encoding == "pcm16" else data
        value = roughness(decode(usable, encoding))
        if 0 < value < NOISE_ROUGHNESS * 0.7:
            scores[encoding] = value
    if not scores:
        return None
    smoothest: Encoding = min(scores, key=scores.__getitem__)
    return smoothest
