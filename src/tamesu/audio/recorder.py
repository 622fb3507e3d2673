"""Both sides of a conversation on one timeline, written as the stereo `audio.wav` (user left, agent right).

The user's audio is placed where it was sent, as the line carried it (decoded from the wire: a G.711 caller
is recorded band-limited, as the agent heard it); the agent's where the playback clock says it was heard.
Both are kept at 16 kHz (what VAD and Whisper read), whatever rate the wire used.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from tamesu.audio.clip import Clip

RECORD_RATE = 16000


class Recorder:
    def __init__(self, rate: int = RECORD_RATE) -> None:
        self.rate = rate
        self._user: list[tuple[float, np.ndarray]] = []
        self._agent: list[tuple[float, np.ndarray]] = []

    def user(self, clip: Clip, at_ms: float) -> None:
        self._user.append((at_ms, clip.at(self.rate).samples))

    def agent(self, clip: Clip, at_ms: float) -> None:
        self._agent.append((at_ms, clip.at(self.rate).samples))

    def cut_agent(self, at_ms: float) -> None:
        """Drop agent audio placed after `at_ms` (a barge-in flushed the player before it was heard)."""
        cut = int(at_ms * self.rate / 1000)
        kept = []
        for start_ms, samples in self._agent:
            start = int(start_ms * self.rate / 1000)
            if start >= cut:
                continue
            kept.append((start_ms, samples[: cut - start]))
        self._agent = kept

    def _track(self, parts: list[tuple[float, np.ndarray]], length: int) -> np.ndarray:
        track = np.zeros(length, dtype=np.int32)
        for start_ms, samples in parts:
            start = int(start_ms * self.rate / 1000)
            end = min(length, start + samples.size)
            if end > start:
                track[start:end] += samples[: end - start]
        return np.clip(track, -32768, 32767).astype(np.int16)

    def length(self) -> int:
        ends = [int(s * self.rate / 1000) + a.size for s, a in [*self._user, *self._agent]]
        return max(ends, default=0)

    def tracks(self) -> tuple[Clip, Clip]:
        length = self.length()
        return Clip(self._track(self._user, length), self.rate), Clip(self._track(self._agent, length), self.rate)

    def write(self, path: Path, tracks: tuple[Clip, Clip] | None = None) -> None:
        """The stereo WAV; `tracks` when they were built already."""
        user, agent = tracks or self.tracks()
        stereo = np.column_stack([user.samples, agent.samples]).astype("<i2")
        path.parent.mkdir(parents=True, exist_ok=True)
        with wave.open(str(path), "wb") as wav:
            wav.setnchannels(2)
            wav.setsampwidth(2)
            wav.setframerate(self.rate)
            wav.writeframes(stereo.tobytes())
