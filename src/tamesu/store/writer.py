"""The store as a reporter: every finished test is written as it finishes, on a thread of its own.

The run never waits for the database: a test's rows are queued and a writer thread commits them (tests that
finish within a second of each other share one transaction), so a slow or unreachable server costs
the run nothing. A store that fails is one warning; the run folder is complete
either way and `tamesu store import RUN_DIR` fills the store in later.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tamesu import __version__
from tamesu.results.provenance import Provenance
from tamesu.results.records import RunResult, RunSummaryFile, TestResult
from tamesu.store import StoreLocked
from tamesu.store.lite import LiteStore
from tamesu.store.records import PartInfo, RunInfo, test_record

if TYPE_CHECKING:  # the engine's types, named for the reporter protocol only; Store only for its type
    from tamesu.plan import Plan, PlannedTest
    from tamesu.store.db import Store

FLUSH_TIMEOUT_S = 30.0
"""How long the end of a run waits for what is queued, beyond one wait for the store (its `timeout`: a write
that waits for a locked file says so itself, before this gives up on it)."""
BATCH_WINDOW_S = 1.0
"""How long a finished test may wait for others to share its transaction: its delay to the store at most."""
BATCH_MAX = 500
_STOP = object()


class _Record:
    """A finished test waiting for the writer thread (plain, masked data)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class StoreWriter:
    def __init__(self, store: Store | LiteStore, provenance: Provenance, *, project_dir: Path, shard: str | None,
                 redact: Callable[[Any], Any], warn: Callable[[str], None],
                 secret_in: Callable[[str], bool] | None = None) -> None:
        self.store = store
        self.provenance = provenance
        self.project_dir = project_dir
        self.shard = shard
        self.redact = redact
        self.secret_in = secret_in
        """Whether a record's JSON text holds a secret (`Redactor.in_json`); None: mask every record."""
        self.warn = warn
        self.failed = False
        self.runs_stored = 0
        """The runs in the store once this one was written (0 until then, or when writing failed)."""
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="tamesu-store", daemon=True)
        self._run: RunInfo | None = None
        self._part_id: int | None = None
        self._slo: dict[str, dict[str, float]] = {}
        self._run_dir: Path | None = None

    # the Reporter protocol

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        now = dt.datetime.now(dt.UTC).isoformat()
        self._run = RunInfo(id=self.provenance.run_id or run_dir.name, started_at=now,
                            commit=self.provenance.commit, branch=self.provenance.branch,
                            project=str(self.project_dir), tamesu_version=__version__)
        self._slo = {test.id: dict(test.slo) for test in tests if getattr(test, "slo", None)}
        self._run_dir = run_dir
        part = PartInfo(dir=str(run_dir.resolve()), started_at=now, shard=self.shard, host=socket.gethostname())
        self._thread.start()
        self._queue.put(lambda: self._begin(part))

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        pass

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        pass

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        # masked here, on the run's thread, so no secret is ever queued for the database; most records hold
        # none, and one search of their JSON text is cheaper than masking every string (measured: the store's
        # own CPU 0.21 s -> 0.17 s on 1000 tests, bench/store_own.py)
        record = test_record(result, runs, self._slo.get(result.id), self._run_dir)
        if self.secret_in is None or self.secret_in(json.dumps(record, ensure_ascii=False, default=str)):
            record = self.redact(record)
        self._queue.put(_Record(record))

    def warning(self, message: str) -> None:
        pass

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        self._queue.put(lambda: self._finish(summary))
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Wait for what is queued (bounded: FLUSH_TIMEOUT_S and one wait for the store), then let the thread end."""
        if not self._thread.is_alive():
            return
        if timeout is None:
            timeout = FLUSH_TIMEOUT_S + self.store.timeout
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.warn(f"store: still writing after {timeout:.0f}s, stopped waiting; the run folder is complete "
                      "and `tamesu store import RUN_DIR` fills the store in")
        else:
            self.store.close()

    # the writer thread

    def _work(self) -> None:
        while True:
            jobs = self._next_batch()
            records = [job.data for job in jobs if isinstance(job, _Record)]
            other = None if isinstance(jobs[-1], _Record) else jobs[-1]
            if not self.failed:
                try:
                    if records:
                        self._write(records)
                    if other is not None and other is not _STOP:
                        other()
                except Exception as exc:  # any database error: say it once, keep the run going
                    self.failed = True
                    said = str(exc) if isinstance(exc, StoreLocked) else \
                        f"store: cannot write to {self.store.shown}: {_short(exc)}"
                    self.warn(f"{said}; the run folder is complete, `tamesu store import RUN_DIR` fills the store "
                              "in later")
            if other is _STOP:
                return

    def _next_batch(self) -> list[Any]:
        """The next job; after a finished test, every test finishing within BATCH_WINDOW_S of it too (up to
        BATCH_MAX), so a busy run pays for one transaction per batch rather than one per test. A job that is
        not a test (the run's start or end) ends the batch."""
        jobs = [self._queue.get()]
        deadline = time.monotonic() + BATCH_WINDOW_S
        while isinstance(jobs[-1], _Record) and len(jobs) < BATCH_MAX:
            remaining = deadline - time.monotonic()
            try:
                jobs.append(self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return jobs

    def _begin(self, part: PartInfo) -> None:
        assert self._run is not None
        self.store.migrate()
        self._part_id = self.store.begin_part(self._run, part)

    def _write(self, records: list[dict[str, Any]]) -> None:
        assert self._run is not None and self._part_id is not None
        self.store.write_records(self._run, self._part_id, records)

    def _finish(self, summary: RunSummaryFile) -> None:
        assert self._part_id is not None
        self.runs_stored = self.store.finish_part(self._part_id, summary.finished_at, summary.exit_code,
                                                  summary.counts, summary.interrupted)


def _short(exc: Exception) -> str:
    """The first line of a driver's error, without the SQL it was running."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
