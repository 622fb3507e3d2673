"""A run's writes to a SQLite store through the standard library's sqlite3, without SQLAlchemy.

History is on by default, so every run pays for its writes: importing SQLAlchemy alone was half of what the
store cost a run (0.16 s of CPU), and its statement machinery most of the rest. A run only appends rows to a
schema that already exists, which needs neither. So when the SQLite file is already at HEAD_REVISION a run
writes through this module; and when there is no file yet it creates one at HEAD_REVISION from `schema.sql`,
the statements the migrations make (SQLAlchemy and Alembic cost a first run in a new project 0.5 s of CPU to
import and 0.05 s to migrate). Migrating an older store, PostgreSQL, `tamesu store import` and `tamesu view`
use SQLAlchemy (`db`, `queries`). The column lists below and `schema.sql` are checked against `_tables` and
the migrations by tests, so the two writers cannot drift apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from tamesu.store import StoreError, StoreLocked, password_hidden
from tamesu.store.records import PartInfo, RunInfo

HEAD_REVISION = "0004"
"""The newest migration; a store already there is written without SQLAlchemy or Alembic (a test keeps it true)."""

RUN_COLUMNS = ("id", "started_at", "commit", "branch", "project", "tamesu_version")
PART_COLUMNS = ("run_id", "shard", "dir", "host", "started_at")
TEST_COLUMNS = ("id", "run_id", "part_id", "test_id", "suite", "name", "case_name", "tags", "target", "status",
                "passed_runs", "total_runs", "pass_threshold", "duration_ms", "quarantine", "skip_reason", "commit",
                "started_at", "slo", "stats", "reason")
RUN_ROW_COLUMNS = ("id", "test_result_id", "number", "attempt", "status", "error", "fault", "fault_reason",
                   "end_reason", "duration_ms", "dir", "target_type", "transcript", "transcript_hash", "trace_ids",
                   "spans", "llm_cost_usd", "llm_tokens", "metrics", "not_evaluated")
ASSERTION_COLUMNS = ("test_run_id", "name", "passed", "reason", "score", "on_turn", "model", "prompt_version", "fake")
JSON_COLUMNS = frozenset({"tags", "slo", "stats", "transcript", "trace_ids", "spans", "metrics", "counts"})
"""The columns `_tables` declares as JSON: SQLAlchemy keeps them as JSON text in SQLite, and so does this."""
SCHEMA_FILE = Path(__file__).with_name("schema.sql")
"""The CREATE statements of a store at HEAD_REVISION as the migrations make them (scripts/gen_store_schema.py)."""
SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON")
"""Run on every SQLite connection, by this writer and by `db`'s engine (`set_pragmas`): WAL lets `tamesu view` read
while runs write; NORMAL syncs at checkpoints, not every commit; SQLite leaves foreign keys off unless asked."""


SQLITE_WAIT_S = 60.0
"""How long a write waits for another writer of the same SQLite file (its migration lock, then SQLite's own
lock) before it gives up. Generous: runs side by side on one store hold it for milliseconds at a time, but on a
loaded machine a commit can wait seconds for the disk, and one CI run gave up after the 5 s this was."""
SERVER_WAIT_S = 5.0
"""How long connecting to a PostgreSQL server waits: one that is down is said this soon."""


def store_timeout(default: float = SERVER_WAIT_S) -> float:
    """How long a write waits for a locked SQLite file or an unreachable server before it gives up
    (TAMESU_STORE_TIMEOUT seconds; unset, `default`: SQLITE_WAIT_S for a file, SERVER_WAIT_S for a server)."""
    import math

    given = os.environ.get("TAMESU_STORE_TIMEOUT", "").strip()
    if not given:
        return default
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise StoreError(f"TAMESU_STORE_TIMEOUT: expected a number of seconds above 0, got {given!r}")
    return max(0.05, seconds)


def sqlite_path(url: str) -> str | None:
    """The file of a plain `sqlite:///PATH` URL (as `store_url` makes them); None for anything else (another
    database, options in the URL, memory), which SQLAlchemy handles."""
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url.removeprefix("sqlite:///")
    return path if path and path != ":memory:" else None


def set_pragmas(connection: Any, path: str | None, timeout: float) -> None:
    """SQLITE_PRAGMAS on a new connection to `path` (a sqlite3 connection, this writer's or SQLAlchemy's).

    The first connection to a new file switches it to WAL, a write that SQLite refuses at once, busy timeout or
    not, while another connection is switching it too: two runs starting on one new store made one fail with
    "database is locked". So a file not yet in WAL mode is switched under the migration lock, and whoever comes
    second waits for the first (bounded) and finds it switched."""
    cursor = connection.cursor()
    try:
        if path is None or path == ":memory:" or cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            for pragma in SQLITE_PRAGMAS:
                cursor.execute(pragma)
            return
        with _migration_lock(path, timeout):
            for pragma in SQLITE_PRAGMAS:
                cursor.execute(pragma)
    finally:
        cursor.close()


def is_busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" (its busy wait ran out), also as SQLAlchemy wraps it."""
    error = getattr(exc, "orig", None) or exc
    return isinstance(error, sqlite3.OperationalError) and error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY


@contextlib.contextmanager
def waiting_on(path: str) -> Iterator[None]:
    """What happens inside may wait for another writer of `path`: SQLite's "database is locked" comes out as
    StoreLocked, one line naming the file and how long this waited (the driver's words name neither)."""
    started = time.monotonic()
    try:
        yield
    except Exception as exc:
        if not is_busy(exc):
            raise
        raise StoreLocked(path, time.monotonic() - started) from None


def open_lite(url: str) -> LiteStore | None:
    """A writer for the SQLite store at `url` when its schema is current, or when there is no file yet (its
    `migrate` creates it); None when the store is elsewhere or older (SQLAlchemy's `Store` migrates it).
    Raises StoreError for a bad timeout, OSError for a folder it cannot make, as `Store` does."""
    timeout = store_timeout(SQLITE_WAIT_S)
    path = sqlite_path(url)
    if path is None:
        return None
    if not os.path.lexists(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return LiteStore(url, path, timeout, create=True)
    if not os.path.isfile(path):
        return None
    try:
        # without waiting: a file that cannot be read now is left to the full writer and its errors
        probe = sqlite3.connect(path, timeout=0)
        try:
            row = probe.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            probe.close()
    except sqlite3.Error:
        return None
    if row is None or row[0] != HEAD_REVISION:
        return None
    return LiteStore(url, path, timeout)


def _rows(columns: Sequence[str], items: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Each item's values in the order of `columns`, those of JSON columns as JSON text (None stays NULL)."""
    as_json = [index for index, column in enumerate(columns) if column in JSON_COLUMNS]
    rows = []
    for item in items:  # a loop, not a function call per cell: a test's rows are a few dozen cells
        row = [item.get(column) for column in columns]
        for index in as_json:
            if row[index] is not None:
                row[index] = json.dumps(row[index])
        rows.append(tuple(row))
    return rows


def _insert(table: str, columns: Sequence[str]) -> str:
    names = ", ".join(f'"{column}"' for column in columns)  # quoted: `commit` is an SQL keyword
    return f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})"


class LiteStore:
    """The writes of one run (the methods `StoreWriter` calls on `db.Store`), on one connection opened by the
    writer thread. Every write is one transaction that takes the write lock first (BEGIN IMMEDIATE), so ids
    can be handed out as max(id) + 1, as SQLite would, and a batch of tests costs three executemany calls."""

    def __init__(self, url: str, path: str, timeout: float, create: bool = False) -> None:
        self.url = url
        self.path = path
        self.timeout = timeout
        self.create = create
        """There was no file when this writer was chosen: `migrate` makes the schema (unless another run has)."""
        self._connection: sqlite3.Connection | None = None

    @property
    def shown(self) -> str:
        return password_hidden(self.url)

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            # the writer thread opens it; `close` may come from the run's thread once that one has ended
            connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                         check_same_thread=False)
            try:
                set_pragmas(connection, self.path, self.timeout)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def migrate(self) -> None:
        """The schema was current when this writer was chosen, or is made now in a new file; one that changed
        since is refused, not written."""
        with waiting_on(self.path):
            if self.create:
                with _migration_lock(self.path, self.timeout):
                    connection = self._connect()
                    self._create_schema(connection)
            else:
                connection = self._connect()
            found = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        if found is None or found[0] != HEAD_REVISION:
            raise StoreError(f"the schema is at revision {found[0] if found else None}, this tamesu writes "
                             f"{HEAD_REVISION}")

    def _create_schema(self, connection: sqlite3.Connection) -> None:
        """The tables of HEAD_REVISION in one transaction, unless a run that started at the same time (this
        tamesu or SQLAlchemy's `Store`, under the same lock) has made them."""
        cursor = self._transaction()
        ok = False
        try:
            if cursor.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                for statement in schema_statements():
                    cursor.execute(statement)
                cursor.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,))
            ok = True
        finally:
            self._commit(cursor, ok)

    def _transaction(self) -> sqlite3.Cursor:
        with waiting_on(self.path):  # the one statement of a write that waits for other writers
            cursor = self._connect().cursor()
            try:
                cursor.execute("BEGIN IMMEDIATE")
            except BaseException:
                cursor.close()
                raise
        return cursor

    def _commit(self, cursor: sqlite3.Cursor, ok: bool) -> None:
        cursor.execute("COMMIT" if ok else "ROLLBACK")
        cursor.close()

    def begin_part(self, run: RunInfo, part: PartInfo) -> int:
        """The run's row (whichever shard comes first) and this part's row; its id."""
        cursor = self._transaction()
        ok = False
        try:
            run_values = (run.id, run.started_at, run.commit, run.branch, run.project, run.tamesu_version)
            cursor.execute(_insert("runs", RUN_COLUMNS) + " ON CONFLICT (id) DO NOTHING", run_values)
            cursor.execute(_insert("run_parts", PART_COLUMNS),
                           (run.id, part.shard, part.dir, part.host, part.started_at))
            part_id = cursor.lastrowid
            ok = part_id is not None
        finally:
            self._commit(cursor, ok)
        assert part_id is not None
        return part_id

    def write_records(self, run: RunInfo, part_id: int, records: list[dict[str, Any]]) -> None:
        """Finished tests (`test_record`s) in one transaction of three executemany calls."""
        if not records:
            return
        cursor = self._transaction()
        ok = False
        try:
            test_id = _max_id(cursor, "test_results")
            run_id = _max_id(cursor, "test_runs")
            tests: list[dict[str, Any]] = []
            runs: list[dict[str, Any]] = []
            graded: list[dict[str, Any]] = []
            for record in records:
                test_id += 1
                tests.append({**record["test"], "id": test_id, "run_id": run.id, "part_id": part_id,
                              "commit": run.commit, "started_at": run.started_at})
                for item in record["runs"]:
                    run_id += 1
                    runs.append({**item["row"], "id": run_id, "test_result_id": test_id})
                    graded.extend({**a, "test_run_id": run_id} for a in item["assertions"])
            cursor.executemany(_insert("test_results", TEST_COLUMNS), _rows(TEST_COLUMNS, tests))
            cursor.executemany(_insert("test_runs", RUN_ROW_COLUMNS), _rows(RUN_ROW_COLUMNS, runs))
            cursor.executemany(_insert("assertions", ASSERTION_COLUMNS), _rows(ASSERTION_COLUMNS, graded))
            ok = True
        finally:
            self._commit(cursor, ok)

    def finish_part(self, part_id: int, finished_at: str, exit_code: int, counts: dict[str, int],
                    interrupted: str | None) -> int:
        """Close the part; how many runs the store now holds (the console's pointer to `tamesu view`)."""
        cursor = self._transaction()
        ok = False
        try:
            cursor.execute("UPDATE run_parts SET finished_at = ?, exit_code = ?, counts = ?, interrupted = ? "
                           "WHERE id = ?", (finished_at, exit_code, json.dumps(counts), interrupted, part_id))
            total = int(cursor.execute("SELECT count(*) FROM runs").fetchone()[0])
            ok = True
        finally:
            self._commit(cursor, ok)
        return total


def schema_statements() -> list[str]:
    """`schema.sql`'s statements, in order (none holds a `;` at the end of a line but its last)."""
    text = "".join(line for line in SCHEMA_FILE.read_text().splitlines(keepends=True) if not line.startswith("--"))
    return [statement for statement in text.split(";\n") if statement.strip()]


_held = threading.local()
"""The migration locks this thread holds: a connection it opens while holding one (SQLAlchemy's pool, while
Alembic migrates) does not wait for itself."""


@contextlib.contextmanager
def _migration_lock(path: str, timeout: float = SQLITE_WAIT_S) -> Iterator[None]:
    """The lock a run takes to make or migrate a SQLite file and to switch a new one to WAL (`set_pragmas`): two
    runs starting at once make the tables once. Waited for at most `timeout` seconds (then StoreLocked).

    Its file (`<store>.migrate-lock`) is removed by the holder before it lets go, so none is left beside the
    store. A run that was waiting on the removed file then holds a lock on a file no other run can find: it sees
    the path is no longer its file and takes the lock again on the path's new one."""
    held_here: set[str] = _held.__dict__.setdefault("paths", set())
    if path in held_here:
        yield
        return
    handle = _lock_file(path, timeout)
    held_here.add(path)
    try:
        yield
    finally:
        held_here.discard(path)
        with contextlib.suppress(OSError):
            os.unlink(path + ".migrate-lock")
        handle.close()  # lets go of the lock, after its file is gone


def _lock_file(path: str, timeout: float) -> TextIO:
    """The open `<path>.migrate-lock`, locked by this process; StoreLocked after `timeout` seconds. Polled (flock
    cannot wait with a bound), at most 50 ms apart: the lock is held for milliseconds."""
    import fcntl

    lock = path + ".migrate-lock"
    started = time.monotonic()
    pause = 0.001
    while True:
        handle = open(lock, "a")  # noqa: SIM115 - returned locked, closed by the caller
        try:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = time.monotonic() - started
                    if waited >= timeout:
                        raise StoreLocked(path, waited) from None
                    time.sleep(min(pause, timeout - waited))
                    pause = min(pause * 2, 0.05)
            held = os.fstat(handle.fileno())
            try:
                named = os.stat(lock)
            except FileNotFoundError:
                named = None
        except BaseException:
            handle.close()
            raise
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return handle
        handle.close()


def _max_id(cursor: sqlite3.Cursor, table: str) -> int:
    return int(cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0])
