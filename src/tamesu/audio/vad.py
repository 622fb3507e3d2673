"""Speech segments with Silero VAD's ONNX file on onnxruntime.

The file is the one faster-whisper (already in the voice extra) ships in `faster_whisper/assets`, found
without importing faster-whisper, so one `pip install 'tamesu[voice]'` brings it (the `silero-vad` package's
import needs torch). The model reads 512-sample windows at 16 kHz with the 64 samples before each window as
context, and carries its LSTM state (`h`, `c`) from window to window; a batch of windows is read in order.
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
DIGITAL_SILENCE = 8
"""No sample louder than this is digital silence: G.711 A-law's quietest code decodes to 8, mu-law's to 0."""
WARM_UP = 8
"""Windows of the silence before a stretch of sound the model reads first (256 ms)."""
_session: object = None
_lock = threading.Lock()


MODEL_NAME = "silero_vad_v6.onnx"


def model_file() -> Path:
    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("faster-whisper is not installed (pip install 'tamesu[voice]')")
    return Path(spec.origin).parent / "assets" / MODEL_NAME


def _fresh_state() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((1, 1, 128), dtype=np.float32), np.zeros((1, 1, 128), dtype=np.float32)


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
    """The speech probability of every 32 ms window of `clip`. A window of digital silence (no sample beyond
    `DIGITAL_SILENCE`: where a recording had no audio, or a G.711 line's silence) is no speech, and the model
    starts afresh after it: its state, carried through seconds of zeros, drifted so far that the speech after
    scored 0.1-0.5 where it scores 0.6-0.9 from a fresh state (a phone agent's reply 12 s into a call went
    unheard)."""
    audio = clip.at(VAD_RATE).samples.astype(np.float32) / 32768.0
    count = audio.size // WINDOW
    out = np.zeros(count, dtype=np.float32)
    if count == 0:
        return out
    session = _model()
    windows = audio[: count * WINDOW].reshape(count, WINDOW)
    context = np.concatenate([np.zeros((1, CONTEXT), dtype=np.float32), windows[:-1, -CONTEXT:]])
    batch = np.concatenate([context, windows], axis=1)
    sound = np.abs(windows).max(axis=1) > DIGITAL_SILENCE / 32768.0
    # each run of windows with sound, read in order from a fresh state that has heard a little of the silence
    # before it (from a fresh state at its first window, a loud onset scored under 0.5 for 600 ms)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], sound.astype(np.int8), [0]])))
    previous = 0
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        first = max(previous, start - WARM_UP)
        h, c = _fresh_state()
        with _lock:
            prob, _, _ = session.run(None, {"input": batch[first:end], "h": h, "c": c})
        out[start:end] = np.asarray(prob, dtype=np.float32).reshape(-1)[start - first:]
        previous = end
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
        self._h, self._c = _fresh_state()
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
        while self._buffer.size >= WINDOW:
            window, self._buffer = self._buffer[:WINDOW], self._buffer[WINDOW:]
            model_input = np.concatenate([self._context, window])[None, :]
            self._context = window[-CONTEXT:]
            with _lock:
                prob, self._h, self._c = session.run(None, {"input": model_input, "h": self._h, "c": self._c})
            p = float(np.asarray(prob).reshape(-1)[0])
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
