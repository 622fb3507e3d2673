"""A speech worker process (`python -m tamesu.audio._worker PARENT_PID`), started by `tamesu.audio.pool`.

It reads pickled jobs, `(name, args)`, from stdin and writes `(True, value)` or `(False, message)` to the
pipe that was its stdout, one job at a time, until stdin closes. Its own fd 1 goes to stderr, so a library
that prints cannot break the pipe's framing. The models load on the first job that needs them and stay.

`PARENT_PID --kept` is a worker of the speech worker keeper (`tamesu.audio.keeper`): its stdin is a socket to
the keeper, which hands it one run's connection at a time (a file descriptor). It writes its pid to the
connection, serves that run's jobs over it as above until the run closes it, and tells the keeper it is free
again, with the models it holds (`free_message`), so the keeper ends the worker whose models others hold too.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import socket
import sys
from collections.abc import Callable
from typing import IO, Any

_PR_SET_PDEATHSIG = 1
FREE = b"f"
"""What a kept worker's message to the keeper starts with when it is ready for a run (started, or its last run
gone): then the models it has loaded, as a JSON list, and a newline."""


def loaded_models() -> list[str]:
    """The models this process holds: `whisper`, and `piper:REF` for each Piper voice loaded."""
    stt, tts = sys.modules.get("tamesu.audio.stt"), sys.modules.get("tamesu.audio.tts")
    held = ["whisper"] if stt is not None and getattr(stt, "_model", None) is not None else []
    return held + sorted(f"piper:{ref}" for ref in getattr(tts, "_loaded", {}))


def free_message() -> bytes:
    return FREE + json.dumps(loaded_models()).encode() + b"\n"


def _jobs() -> dict[str, Callable[..., Any]]:
    from tamesu.audio import stt, tts

    def load_whisper() -> None:  # the model itself stays here: a reply is pickled
        stt.model()

    return {"synthesise": tts.piper_say, "transcribe": stt.transcribe, "load_voice": tts.preload,
            "load_whisper": load_whisper}


def _serve(requests: IO[bytes], replies: IO[bytes], jobs: dict[str, Callable[..., Any]]) -> None:
    """Jobs from `requests`, each reply to `replies`, until `requests` ends (or `replies` is gone)."""
    while True:
        try:
            name, args = pickle.load(requests)
        except (EOFError, OSError, pickle.UnpicklingError):
            return
        try:
            reply: tuple[bool, Any] = (True, jobs[name](*args))
        except Exception as exc:  # the caller raises it as one line; the worker serves the next job
            reply = (False, f"{type(exc).__name__}: {exc}")
        try:
            pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
            replies.flush()
        except OSError:  # the run went while its job ran
            return


def _kept(jobs: dict[str, Callable[..., Any]]) -> None:
    """A keeper's worker: runs, one at a time, each handed over on stdin, until the keeper closes it."""
    # nothing loaded ahead: a worker the keeper starts for a run is ready as soon as a run's own would be (loading
    # Whisper and Piper both before the first job held up every run that found all workers lent, at -n 4 in
    # the tests); each model loads at its first job (a call's warm-up asks) and stays for the runs after
    keeper = socket.socket(fileno=os.dup(0))
    os.dup2(2, 0)
    keeper.sendall(free_message())
    while True:
        _, fds, _, _ = socket.recv_fds(keeper, 1, 1)
        if not fds:
            return  # the keeper has ended
        with (socket.socket(fileno=fds[0]) as run, run.makefile("rb") as requests, run.makefile("wb") as replies,
              contextlib.suppress(OSError)):
            pickle.dump(os.getpid(), replies, protocol=pickle.HIGHEST_PROTOCOL)
            replies.flush()
            _serve(requests, replies, jobs)
        keeper.sendall(free_message())


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
    jobs = _jobs()
    if sys.argv[2:] == ["--kept"]:
        replies.close()
        _kept(jobs)
        return
    _serve(sys.stdin.buffer, replies, jobs)


if __name__ == "__main__":
    main()
