"""A piece of mono audio in memory: int16 samples and their rate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tamesu.audio import codecs
from tamesu.audio.formats import AudioFormat
from tamesu.audio.resample import resample


@dataclass
class Clip:
    samples: np.ndarray
    rate: int

    @property
    def duration_ms(self) -> float:
        return self.samples.size / self.rate * 1000.0

    def at(self, rate: int) -> Clip:
        return self if rate == self.rate else Clip(resample(self.samples, self.rate, rate), rate)

    def wire(self, fmt: AudioFormat) -> bytes:
        """These samples as the bytes a target sends in `fmt`."""
        return codecs.encode(self.at(fmt.rate).samples, fmt.encoding)

    @classmethod
    def from_wire(cls, data: bytes, fmt: AudioFormat) -> Clip:
        return cls(codecs.decode(data, fmt.encoding), fmt.rate)

    @classmethod
    def silence(cls, ms: float, rate: int) -> Clip:
        return cls(np.zeros(int(rate * ms / 1000), dtype=np.int16), rate)

    def padded(self, before_ms: float = 0.0, after_ms: float = 0.0) -> Clip:
        parts = [Clip.silence(before_ms, self.rate).samples, self.samples, Clip.silence(after_ms, self.rate).samples]
        return Clip(np.concatenate(parts), self.rate)
