"""Speech segments with Silero VAD's ONNX file on onnxruntime.

`import silero_vad` needs torch, so the package is installed `--no-deps` and only its ONNX file is used,
found without importing the package. The model reads 512-sample windows at 16 kHz with the 64 samples
before each window as context, and carries a state from window to window.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tamesu.audio.clip import Clip

VAD_RATE = 16000
WINDOW = 512
CONTEXT = 64
WINDOW_MS = WINDOW / VAD_RATE * 1000
_session: Any = None
_lock = threading.Lock()


def model_file() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("silero-vad is not installed (pip install --no-deps silero-vad)")
    return Path(spec.origin).parent / "data" / "silero_vad.onnx"


def _model() -> Any:
    global _session
    with _lock:
        if _session is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            _session = onnxruntime.InferenceSession(str(model_file()), sess_options=options,
                                                    providers=["CPUExecutionProvider"])
        return _session


def probabilities(clip: Clip) -> np.ndarray:
    """The speech probability of every 32 ms window of `clip`."""
    audio = clip.at(VAD_RATE).samples.astype(np.float32) / 32768.0
    count = audio.size // WINDOW
    if count == 0:
        return np.zeros(0, dtype=np.float32)
    session = _model()
    state = np.zeros((2, 1, 128), dtype=np.float32)
    rate = np.array(VAD_RATE, dtype=np.int64)
    padded = np.concatenate([np.zeros(CONTEXT, dtype=np.float32), audio[: count * WINDOW]])
    out = np.empty(count, dtype=np.float32)
    with _lock:
        for i in range(count):
            window = padded[i * WINDOW: i * WINDOW + WINDOW + CONTEXT][None, :]
            prob, state = session.run(None, {"input": window, "state": state, "sr": rate})
            out[i] = float(prob[0][0])
    return out


def segments(clip: Clip, threshold: float = 0.5, min_speech_ms: float = 120.0,
             min_silence_ms: float = 200.0) -> list[tuple[float, float]]:
    """(start_ms, end_ms) of each stretch of speech: windows above `threshold`, pauses shorter than
    `min_silence_ms` bridged, blips shorter than `min_speech_ms` dropped."""
    probs = probabilities(clip)
    found: list[list[float]] = []
    for i, p in enumerate(probs):
        start = i * WINDOW_MS
        if p < threshold:
            continue
        if found and start - found[-1][1] <= min_silence_ms:
            found[-1][1] = start + WINDOW_MS
        else:
            found.append([start, start + WINDOW_MS])
    return [(round(a, 1), round(b, 1)) for a, b in found if b - a >= min_speech_ms]


class StreamingVad:
    """Speech start and stop as audio arrives (an agent's server VAD, a barge-in detector): feed 16 kHz
    samples, get `started` / `stopped` at the window where each was decided."""

    def __init__(self, threshold: float = 0.5, silence_ms: float = 500.0) -> None:
        self.threshold = threshold
        self.silence_ms = silence_ms
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._buffer = np.zeros(0, dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self.position_ms = 0.0
        self.speaking = False
        self._quiet_ms = 0.0
        self.speech_start_ms = 0.0

    def feed(self, samples16k: np.ndarray) -> list[tuple[str, float]]:
        """Events decided by this audio: ("started", ms) and ("stopped", ms), ms since the stream began."""
        self._buffer = np.concatenate([self._buffer, samples16k.astype(np.float32) / 32768.0])
        events: list[tuple[str, float]] = []
        session = _model()
        rate = np.array(VAD_RATE, dtype=np.int64)
        while self._buffer.size >= WINDOW:
            window, self._buffer = self._buffer[:WINDOW], self._buffer[WINDOW:]
            model_input = np.concatenate([self._context, window])[None, :]
            self._context = window[-CONTEXT:]
            with _lock:
                prob, self._state = session.run(None, {"input": model_input, "state": self._state, "sr": rate})
            p = float(prob[0][0])
            if not self.speaking and p >= self.threshold:
                self.speaking, self._quiet_ms, self.speech_start_ms = True, 0.0, self.position_ms
                events.append(("started", self.position_ms))
            elif self.speaking:
                self._quiet_ms = 0.0 if p >= self.threshold - 0.15 else self._quiet_ms + WINDOW_MS
                if self._quiet_ms >= self.silence_ms:
                    self.speaking = False
                    events.append(("stopped", self.position_ms + WINDOW_MS - self._quiet_ms))
            self.position_ms += WINDOW_MS
        return events
