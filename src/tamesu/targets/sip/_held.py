"""How long PJSIP's jitter buffer held the audio the call's port was just given, by the library's own figure.

A call's received audio waits in the stream's adaptive jitter buffer until the media clock takes it; on a
loaded machine that buffer grows to absorb bursts (seen: 10-70 ms). The frames still queued behind the one
just taken arrived after it, so the frame's RTP came in at least that much audio before now: the buffer's
current size (`pjmedia_stream_get_stat_jbuf`, in codec frames) times the codec's frame length. The frame is
then dated at most one media-clock tick (20 ms) after its RTP arrived, instead of that plus the buffer.

pjsua2 hands the stream out only as an address (`onStreamCreated`), so the figure is read with ctypes from
the pjsua2 library already loaded: the call takes no lock, so the media clock's thread may make it.
"""

from __future__ import annotations

import ctypes
import threading

import pjsua2 as pj


class _JbState(ctypes.Structure):
    """pjmedia_jb_state (pjmedia/jbuf.h): what the jitter buffer reports about itself."""

    _fields_ = [(name, ctypes.c_uint) for name in (
        "frame_size", "min_prefetch", "max_prefetch", "max_count", "burst", "prefetch", "size", "avg_delay",
        "min_delay", "max_delay", "dev_delay", "avg_burst", "lost", "discard", "empty")]


_LIBRARY = ctypes.CDLL(pj._pjsua2.__file__)  # already loaded by pjsua2: the same copy of PJSIP
_STAT_JBUF = _LIBRARY.pjmedia_stream_get_stat_jbuf
_STAT_JBUF.argtypes = [ctypes.c_void_p, ctypes.POINTER(_JbState)]
_STAT_JBUF.restype = ctypes.c_int


class HeldAudio:
    """The jitter buffer of the call's audio stream, while it exists."""

    def __init__(self) -> None:
        self._stream: int | None = None
        self._frame_ms = 0.0
        self._state = _JbState()
        self._lock = threading.Lock()  # the main thread swaps the stream; the media clock's thread reads it

    def attach(self, stream: int, frame_ms: float) -> None:
        """A stream was created (`onStreamCreated`): its address and its codec's frame length."""
        with self._lock:
            self._stream, self._frame_ms = stream or None, frame_ms

    def detach(self) -> None:
        """The stream is about to be destroyed (`onStreamDestroyed`): never read it again."""
        with self._lock:
            self._stream = None

    def ms(self) -> float:
        """The audio queued behind the frame the media clock just took, in ms (0 without a stream)."""
        with self._lock:
            if self._stream is None or _STAT_JBUF(self._stream, ctypes.byref(self._state)) != 0:
                return 0.0
            return float(self._state.size) * self._frame_ms
