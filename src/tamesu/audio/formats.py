"""What an audio stream is: its encoding and sample rate, and the size of its frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Encoding = Literal["pcm16", "mulaw", "alaw"]
FRAME_MS = 20


@dataclass(frozen=True)
class AudioFormat:
    encoding: Encoding = "pcm16"
    rate: int = 16000

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self.encoding == "pcm16" else 1

    def frame_bytes(self, ms: int = FRAME_MS) -> int:
        """The bytes of `ms` milliseconds of mono audio."""
        return self.rate * ms // 1000 * self.bytes_per_sample

    def duration_ms(self, size: int) -> float:
        """How long `size` bytes of this audio play."""
        return size / self.bytes_per_sample / self.rate * 1000.0

    def __str__(self) -> str:
        return f"{self.encoding} {self.rate} Hz"


def frames(data: bytes, fmt: AudioFormat, ms: int = FRAME_MS) -> list[bytes]:
    """`data` cut in frames of `ms`; the last one is padded with silence so every frame has the same size."""
    size = fmt.frame_bytes(ms)
    if not data:
        return []
    silence = b"\x00\x00" if fmt.encoding == "pcm16" else (b"\xff" if fmt.encoding == "mulaw" else b"\xd5")
    chunks = [data[i:i + size] for i in range(0, len(data), size)]
    short = size - len(chunks[-1])
    if short:
        chunks[-1] += silence * (short // len(silence))
    return chunks
