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

Many runs at once need a worker each (two a run: synthesis and transcription), ~270 MB apiece once a model is
loaded; kept free between the peaks they held that memory for nothing (13 workers after a test suite at -n 4).
At most `--max-free` workers stay free: one given back beyond that ends, the one whose models other free workers
hold too first (each tells the keeper what it holds as it is given back), so one of each model stays loaded (ended
by the runs it served, it kept two Piper workers and ended the only one with Whisper, which the next run loaded
again); among those alike, the one that served fewest runs (a worker started for a run that found another free
has loaded nothing). The total while runs overlap is not
capped: a run holds one worker while it asks for its second, so runs waiting for a worker could wait on each
other until their jobs time out, and a run turned away would start a worker of its own, as big.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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


def default_max_free() -> int:
    """Two a core (a run's synthesis and transcription each keep one busy), at most 8 (~2 GB)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2 * cores, 8)


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
        self.served = 0
        self.models: frozenset[str] = frozenset()
        """The models it said it holds when it was last given back (`_worker.loaded_models`)."""
        self.said = b""
        """What it has sent of its next message."""

    def lend(self, run: socket.socket) -> bool:
        """Hand `run`'s connection to this worker; False when it has gone meanwhile."""
        try:
            socket.send_fds(self.socket, [b"r"], [run.fileno()])
        except OSError:
            return False
        self.state = "lent"
        self.served += 1
        return True

    def end(self) -> None:
        self.socket.close()
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()


class Keeper:
    def __init__(self, path: Path, max_free: int) -> None:
        self.path = path
        self.max_free = max_free
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
            said = kept.socket.recv(4096)
        except OSError:
            said = b""
        if said:
            kept.said += said
            while b"\n" in kept.said:
                line, kept.said = kept.said.split(b"\n", 1)
                if line.startswith(FREE):
                    kept.state = "free"
                    kept.models = _models(line[len(FREE):])
            return
        # it died: killed by the run it was lent to (a job that hung), or before it was ready, when the
        # run that waits longest for it is told (its connection closed: "the speech worker died")
        if kept.state == "loading" and self.waiting:
            self.waiting.popleft().close()
        self._end(kept)

    def _end(self, kept: _Kept) -> None:
        self.selector.unregister(kept.socket)
        self.kept.remove(kept)
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
        free = [kept for kept in self.kept if kept.state == "free"]
        while len(free) > self.max_free:
            ended = min(free, key=lambda kept: (len(_only_holder(kept, free)), len(kept.models), kept.served))
            free.remove(ended)
            self._end(ended)

    def close(self) -> None:
        for run in self.waiting:
            run.close()
        for kept in self.kept:
            kept.end()
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _only_holder(kept: _Kept, free: list[_Kept]) -> frozenset[str]:
    """The models `kept` holds that no other of the `free` workers does: ending it, a run would load them again."""
    others = frozenset().union(*(other.models for other in free if other is not kept))
    return kept.models - others


def _models(text: bytes) -> frozenset[str]:
    try:
        names = json.loads(text or b"[]")
    except ValueError:
        return frozenset()
    return frozenset(str(name) for name in names) if isinstance(names, list) else frozenset()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tamesu.audio.keeper",
                                     description="Keep speech workers warm for the runs that name SOCKET in "
                                                 "TAMESU_SPEECH_KEEPER.")
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on (it must not exist)")
    parser.add_argument("--max-free", type=_count, default=default_max_free(), metavar="N",
                        help="workers kept free between runs; one given back beyond N ends (default: two a core, "
                             f"at most 8: {default_max_free()} here)")
    args = parser.parse_args(argv)
    try:
        keeper = Keeper(args.socket, args.max_free)
    except OSError as exc:
        sys.exit(f"cannot listen on {args.socket}: {exc.strerror or exc}")
    print(f"keeping speech workers at {args.socket}", flush=True)
    keeper.serve()


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a whole number of workers, 0 or more, not {text!r}")
    return int(text)


if __name__ == "__main__":
    main()
