"""Any sample rate to any other: a windowed-sinc low-pass when the rate goes down (so speech does not
alias), then linear interpolation onto the new sample times. Good enough for speech and for Whisper, cheap
enough to run on every frame of several conversations at once."""

from __future__ import annotations

from functools import cache

import numpy as np


@cache
def _lowpass(cutoff: float, taps: int = 31) -> np.ndarray:
    """A Hann-windowed sinc low-pass; `cutoff` is a fraction of the source rate (0..0.5)."""
    n = np.arange(taps) - (taps - 1) / 2
    kernel = 2 * cutoff * np.sinc(2 * cutoff * n) * np.hanning(taps)
    return kernel / kernel.sum()


def resample(samples: np.ndarray, source_rate: int, target_rate: int) -> np.ndarray:
    """int16 samples at `source_rate` as int16 samples at `target_rate`."""
    if source_rate == target_rate or samples.size == 0:
        return samples.astype(np.int16)
    signal = samples.astype(np.float32)
    if target_rate < source_rate:
        kernel = _lowpass(0.5 * target_rate / source_rate * 0.95)
        # "full", then the centred part: "same" would return the kernel's length for a shorter signal
        half = (kernel.size - 1) // 2
        signal = np.convolve(signal, kernel, mode="full")[half: half + samples.size]
    count = round(samples.size * target_rate / source_rate)
    positions = np.arange(count) * (source_rate / target_rate)
    out = np.interp(positions, np.arange(samples.size), signal)
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def to_float(samples: np.ndarray) -> np.ndarray:
    return samples.astype(np.float32) / 32768.0
