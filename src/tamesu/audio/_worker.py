"""A speech worker process (`python -m tamesu.audio._worker PARENT_PID`), started by `tamesu.audio.pool`.

It reads pickled jobs, `(name, args)`, from stdin and writes `(True, value)` or `(False, message)` to the
pipe that was its stdout, one job at a time, until stdin closes. Its own fd 1 goes to stderr, so a library
that prints cannot break the pipe's framing. The models load on the first job that needs them and stay.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def _jobs() -> dict[str, Callable[..., Any]]:
    from tamesu.audio import stt, tts

    return {"synthesise": tts.piper_say, "transcribe": stt.transcribe, "load_voice": tts.preload}


def main() -> None:
    # Ctrl-C reaches the whole foreground group: the parent stops the run, a worker prints no traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # Linux: killed when the parent dies, however it ends
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if len(sys.argv) > 1 and os.getppid() != int(sys.argv[1]):
        return  # the parent died before the line above took effect
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    jobs = _jobs()
    while True:
        try:
            name, args = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: tuple[bool, Any] = (True, jobs[name](*args))
        except Exception as exc:  # the caller raises it as one line; the worker serves the next job
            reply = (False, f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    main()
