"""How long ago the audio the call's port was just given came in as RTP, by PJSIP's own figures.

A call's received audio waits in the stream's adaptive jitter buffer until the media clock takes it, once a
20 ms tick; on a loaded machine that buffer grows to absorb bursts (seen: 10-70 ms). Two of the library's
figures date a frame back to its RTP: the audio still queued behind it (`pjmedia_stream_get_stat_jbuf`: the
buffer's size in codec frames times the codec's frame length), which came in after it, and how long ago the
newest packet came in (the stream's count of received packets, `pjmedia_stream_get_stat`, watched every
`WATCH_S`: when it last grew). Without the watch (the packet count moved on since it looked) a frame is dated
at most a tick late; the time since the newest packet counts up to a tick, so that a line that stops sending
(silence suppression) never dates its frames further back.

pjsua2 hands the stream out only as an address (`onStreamCreated`), so the figures are read with ctypes from
the pjsua2 library already loaded (pjsua2-python pins PJSIP 2.15.1: the structs below are its headers'). Both
calls copy without taking a lock, so the media clock's thread may make them.
"""

from __future__ import annotations

import ctypes
import threading
import time

import pjsua2 as pj


class _JbState(ctypes.Structure):
    """pjmedia_jb_state (pjmedia/jbuf.h): what the jitter buffer reports about itself."""

    _fields_ = [(name, ctypes.c_uint) for name in (
        "frame_size", "min_prefetch", "max_prefetch", "max_count", "burst", "prefetch", "size", "avg_delay",
        "min_delay", "max_delay", "dev_delay", "avg_burst", "lost", "discard", "empty")]


class _TimeVal(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("msec", ctypes.c_long)]


class _MathStat(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("max", ctypes.c_int), ("min", ctypes.c_int), ("last", ctypes.c_int),
                ("mean", ctypes.c_int), ("fmean", ctypes.c_float), ("m2", ctypes.c_double)]


class _StreamStat(ctypes.Structure):
    _fields_ = [("update", _TimeVal), ("update_cnt", ctypes.c_uint), ("pkt", ctypes.c_uint32),
                ("bytes", ctypes.c_uint32), ("discard", ctypes.c_uint), ("loss", ctypes.c_uint),
                ("reorder", ctypes.c_uint), ("dup", ctypes.c_uint), ("loss_period", _MathStat),
                ("loss_type", ctypes.c_uint), ("jitter", _MathStat)]


class _RtcpStat(ctypes.Structure):
    """The head of pjmedia_rtcp_stat (pjmedia/rtcp.h): read into a buffer as large as the whole."""
    _fields_ = [("start", _TimeVal), ("tx", _StreamStat), ("rx", _StreamStat)]


_LIBRARY = ctypes.CDLL(pj._pjsua2.__file__)  # already loaded by pjsua2: the same copy of PJSIP
_STAT_JBUF = _LIBRARY.pjmedia_stream_get_stat_jbuf
_STAT_JBUF.argtypes = [ctypes.c_void_p, ctypes.POINTER(_JbState)]
_STAT_JBUF.restype = ctypes.c_int
_STAT = _LIBRARY.pjmedia_stream_get_stat
_STAT.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_STAT.restype = ctypes.c_int
WATCH_S = 0.002


class HeldAudio:
    """The jitter buffer of the call's audio stream, while it exists."""

    def __init__(self, tick_ms: float) -> None:
        self._tick_ms = tick_ms
        self._stream: int | None = None
        self._frame_ms = 0.0
        self._state = _JbState()
        self._stat = ctypes.create_string_buffer(4096)
        self._rtcp = _RtcpStat.from_buffer(self._stat)
        self._watched: tuple[int, float] | None = None
        """The stream's count of received RTP packets when it last grew, and when that was seen."""
        self._lock = threading.Lock()  # the main thread swaps the stream; the media clock's thread reads it

    def attach(self, stream: int, frame_ms: float) -> None:
        """A stream was created (`onStreamCreated`): its address and its codec's frame length."""
        with self._lock:
            self._stream, self._frame_ms, self._watched = stream or None, frame_ms, None
        threading.Thread(target=self._watch, args=(stream,), daemon=True).start()

    def _packets(self) -> int:
        assert self._stream is not None
        _STAT(self._stream, self._stat)
        return int(self._rtcp.rx.pkt)

    def _watch(self, stream: int) -> None:
        while True:
            with self._lock:
                if self._stream != stream:
                    return
                count = self._packets()
                if self._watched is None or count != self._watched[0]:
                    self._watched = (count, time.monotonic())
            time.sleep(WATCH_S)

    def detach(self) -> None:
        """The stream is about to be destroyed (`onStreamDestroyed`): never read it again."""
        with self._lock:
            self._stream = None

    def ms(self) -> float:
        """How long ago the frame the media clock just took came in, in ms (0 without a stream)."""
        with self._lock:
            if self._stream is None or _STAT_JBUF(self._stream, ctypes.byref(self._state)) != 0:
                return 0.0
            watched = self._watched
            fresh = watched is not None and watched[0] > 0 and self._packets() == watched[0]
            since = (time.monotonic() - watched[1]) * 1000 if fresh and watched is not None else 0.0
            # a packet that came in more than a tick ago with nothing after it: the line went quiet
            return float(self._state.size) * self._frame_ms + min(since, self._tick_ms)
