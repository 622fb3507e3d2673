"""The test agents' end-of-utterance detector: the simplest VAD a voice bot has, on pcm16 frames."""

from __future__ import annotations

import numpy as np

LOUD = 500
"""A frame whose loudest sample is above this is speech (tamesu's caller speaks far louder; silence is 0)."""


class EndOfSpeech:
    """`heard(frame)` is True once per utterance: on the `quiet_frames`-th quiet frame after more than ten loud
    ones; then it waits for the next utterance."""

    def __init__(self, quiet_frames: int) -> None:
        self.quiet_frames = quiet_frames
        self.loud = False
        """Whether the last frame was speech."""
        self._loud = self._quiet = 0

    def heard(self, frame: bytes) -> bool:
        samples = np.frombuffer(frame, "<i2")
        self.loud = bool(samples.size and np.abs(samples).max() > LOUD)
        if self.loud:
            self._loud, self._quiet = self._loud + 1, 0
        else:
            self._quiet += 1
        if self._loud > 10 and self._quiet == self.quiet_frames:
            self._loud = 0
            return True
        return False
