"""Speech workers kept warm across runs: `python -m tamesu.audio.keeper SOCKET`, with `TAMESU_SPEECH_KEEPER=SOCKET`
in the environment of the runs.

Each audio run starts two speech workers (`tamesu.audio.pool`), and each imports its libraries and loads its
model, Whisper or a Piper voice: 1-2 s of CPU a run, and seconds of wall clock on a loaded machine, paid again by
every run of a CI job or a test suite that makes many. The keeper holds workers that keep every model they have
loaded and lends each to one run's pool at a time: a run's worker connects to SOCKET, the
keeper passes the connection to a free worker (a file descriptor over the worker's own socket), and the worker
serves that run's jobs alone until the run closes it, then is free for the next run. A run that finds every
worker busy gets a new one (it loads what the run needs first, as the run's own worker would). Nothing is shared
between runs but the loaded models: a run's synthesis and transcription still wait for no other run's.

The workers are the keeper's processes, not the run's: they outlive each run and end with the keeper (SIGTERM,
Ctrl-C, or however it dies: each asks Linux to kill it with its parent). A run whose job hangs kills the worker
it was lent; the keeper starts another when one is next asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
from collections import deque
from pathlib import Path

from tamesu.audio._worker import FREE

BACKLOG = 64


class _Kept:
    """One worker and the keeper's end of its socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen([sys.executable, "-m", "tamesu.audio._worker", str(os.getpid()), "--kept"],
                                        stdin=theirs.fileno(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        theirs.close()
        self.socket = ours
        self.state = "loading"
        """loading (starting up), free, or lent (to a run)."""

    def lend(self, run: socket.socket) -> bool:
        """Hand `run`'s connection to this worker; False when it has gone meanwhile."""
        try:
            socket.send_fds(self.socket, [b"r"], [run.fileno()])
        except OSError:
            return False
        self.state = "lent"
        return True

    def end(self) -> None:
        self.socket.close()
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()


class Keeper:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(BACKLOG)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.kept: list[_Kept] = []
        self.waiting: deque[socket.socket] = deque()
        """Runs' connections that no free worker has taken yet (a worker is loading for each)."""

    def serve(self) -> None:
        """Until SIGTERM, SIGINT or SIGHUP; then every worker ends and the socket is removed."""
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: None)
        self.selector.register(wake_read, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in self.selector.select():
                    if key.fileobj == wake_read:
                        return
                    if key.fileobj is self.listener:
                        self.waiting.append(self.listener.accept()[0])
                    else:
                        assert isinstance(key.data, _Kept)
                        self._heard(key.data)
                self._pair()
        finally:
            self.close()

    def _heard(self, kept: _Kept) -> None:
        try:
            said = kept.socket.recv(1)
        except OSError:
            said = b""
        if said == FREE:
            kept.state = "free"
            return
        # it died: killed by the run it was lent to (a job that hung), or before it was ready, when the
        # run that waits longest for it is told (its connection closed: "the speech worker died")
        self.selector.unregister(kept.socket)
        self.kept.remove(kept)
        if kept.state == "loading" and self.waiting:
            self.waiting.popleft().close()
        kept.end()

    def _pair(self) -> None:
        """Lend the free workers to the runs waiting, and start one for each run still without."""
        for kept in self.kept:
            if kept.state == "free" and self.waiting:
                run = self.waiting.popleft()
                if not kept.lend(run):
                    self.waiting.appendleft(run)
                    continue
                run.close()
        for _ in range(len(self.waiting) - sum(kept.state == "loading" for kept in self.kept)):
            kept = _Kept()
            self.kept.append(kept)
            self.selector.register(kept.socket, selectors.EVENT_READ, kept)

    def close(self) -> None:
        for run in self.waiting:
            run.close()
        for kept in self.kept:
            kept.end()
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tamesu.audio.keeper",
                                     description="Keep speech workers warm for the runs that name SOCKET in "
                                                 "TAMESU_SPEECH_KEEPER.")
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on (it must not exist)")
    args = parser.parse_args(argv)
    try:
        keeper = Keeper(args.socket)
    except OSError as exc:
        sys.exit(f"cannot listen on {args.socket}: {exc.strerror or exc}")
    print(f"keeping speech workers at {args.socket}", flush=True)
    keeper.serve()


if __name__ == "__main__":
    main()
