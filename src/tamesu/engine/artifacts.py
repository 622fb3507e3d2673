"""The run directory: one folder per run of each test, results.jsonl appended as tests finish."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from tamesu.results.json_files import indented_json
from tamesu.results.rundir import new_run_dir, slug
from tamesu.suite.secrets import Redactor

__all__ = ["RunDirectory", "indented_json", "new_run_dir", "slug"]

class RunDirectory:
    """Writes everything a run leaves behind, with every secret value masked."""

    def __init__(self, root: Path, redactor: Redactor) -> None:
        self.root = root
        self.redactor = redactor
        self._lock = threading.Lock()
        self._used: set[str] = set()
        self._made: set[str] = set()
        """Folders `write_json` made."""
        self.results_path = root / "results.jsonl"
        self._syncer = _Syncer(self.results_path)

    def test_dir(self, suite: str, test: str) -> Path:
        base = f"{slug(suite)}/{slug(test)}"
        with self._lock:
            name, n = base, 1
            while name in self._used:
                n += 1
                name = f"{base}-{n}"
            self._used.add(name)
        return self.root / name

    def write_json(self, path: Path | str, value: BaseModel | object) -> None:
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        text = indented_json(self.redactor.data(data))
        folder = os.path.dirname(path)
        temporary = f"{path}.tmp"
        try:
            try:
                # each test's folders are made once: a run writes two files into each, and pathlib's mkdir
                # of a folder that exists costs syscalls and an exception every time
                fd = self._created(temporary, folder, known=folder in self._made)
            except FileNotFoundError:  # the folder was removed since: made again, as it always was
                fd = self._created(temporary, folder, known=False)
            try:
                _write_all(fd, text)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except OSError:
            # a full disk or a folder gone read-only: no half-written .tmp is left behind
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def _created(self, file: str, folder: str, *, known: bool) -> int:
        if not known:
            os.makedirs(folder, exist_ok=True)
            self._made.add(folder)
        return os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def append_result(self, value: BaseModel) -> None:
        """One line per finished test, written at once (unbuffered) so a killed run keeps it, and synced to
        the disk by a thread of its own (`_Syncer`) so the run's event loop never waits on the disk."""
        line = json.dumps(self.redactor.data(value.model_dump(mode="json")), ensure_ascii=False)
        data = (line + "\n").encode("utf-8")
        with self._lock:
            self._syncer.raise_failure()  # a sync that failed since the last line: the folder takes no more
            fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                before = os.lseek(fd, 0, os.SEEK_END)
                try:
                    _write_all(fd, data)  # unbuffered: nothing is left to be flushed later
                except OSError:
                    # a full disk took part of the line: cut it off, so every line left is a whole result
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, before)
                    raise
            finally:
                os.close(fd)
            self._syncer.request()

    def close(self) -> None:
        """Wait for results.jsonl to be on the disk; raises OSError when a sync of it failed."""
        self._syncer.close()
        self._syncer.raise_failure()


def _write_all(fd: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])


class _Syncer:
    """fsync of one file from a thread of its own, requests coalesced: the lines of tests that finish while a
    sync runs, or within `MIN_INTERVAL_S` of the last one, are synced together by the next one. An fsync
    blocked the event loop 2.5 ms per test here; from this thread it still cost the run 0.14 ms of CPU per
    scripted turn at 100 at once while it synced as often as tests finished (the kernel's journal, and the
    thread taking the interpreter from the run each time), so it syncs at most every `MIN_INTERVAL_S`. Each
    line is written whole the moment its test ends, so a killed run keeps it either way; only a machine that
    loses power can lose the lines of the last fraction of a second. `close` syncs at once. The thread ends
    when idle for `IDLE_S` and starts again on the next request, so none outlives the run."""

    IDLE_S = 1.0
    MIN_INTERVAL_S = 0.2

    def __init__(self, path: Path) -> None:
        self._path = path
        self._condition = threading.Condition()
        self._pending = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._idle = False
        """Whether the thread waits for a request (not out the interval after a sync)."""
        self.failure: OSError | None = None

    def request(self) -> None:
        with self._condition:
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="tamesu-results-sync", daemon=True)
                self._thread.start()
            elif self._idle:
                # only an idle thread is woken: one waiting out the interval would only go back to waiting,
                # taking the interpreter from the run once per finished test
                self._condition.notify()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def close(self) -> None:
        """Once every requested sync is done (the thread has ended)."""
        with self._condition:
            self._closing = True
            thread = self._thread
            self._condition.notify()
        if thread is not None:
            thread.join()

    def _work(self) -> None:
        synced_at: float | None = None
        while True:
            with self._condition:
                if not self._pending and not self._closing:
                    self._idle = True
                    self._condition.wait(self.IDLE_S)
                    self._idle = False
                if not self._pending:
                    self._thread = None  # idle (or closing): a later request starts another thread
                    return
                if synced_at is not None:
                    # the lines of the tests that finish meanwhile go with this sync
                    self._condition.wait_for(lambda: self._closing,
                                             timeout=max(0.0, synced_at + self.MIN_INTERVAL_S - time.monotonic()))
                self._pending = False
            try:
                fd = os.open(self._path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.failure = exc
            synced_at = time.monotonic()
