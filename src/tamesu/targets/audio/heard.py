"""What one listening to the agent on an audio socket gathered (its own module to keep the socket's small)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy comes with the voice extra: a text-mode target of this kind runs without it
    import numpy as np


@dataclass
class Heard:
    """What one listening gathered."""

    pcm: list[np.ndarray] = field(default_factory=list)
    spoke_at: float | None = None
    quiet_from: float | None = None
    """The playback end of the agent's last loud chunk."""
    audio_ms: float = 0.0
    first_audio_wall: float | None = None
    last_audio_wall: float | None = None
    last_chunk_ms: float = 0.0
    arrivals: list[tuple[float, float]] = field(default_factory=list)
    """Each audio chunk's arrival (ms on the session's clock) and duration: a burst from a steady stream."""
    controls: list[dict[str, Any]] = field(default_factory=list)
