"""A run writes a current SQLite store through the standard library (`store.lite`), without SQLAlchemy: the
same rows as SQLAlchemy's writer, read back the same by the view; an absent store is created with the very
schema the migrations make; an older one still goes through SQLAlchemy, which migrates it; and neither the run
that creates the store nor the next one imports SQLAlchemy or Alembic."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.store import StoreLocked, lite
from tamesu.store import _tables as t
from tamesu.store.db import Store
from tamesu.store.queries import Reader
from tamesu.store.records import PartInfo, RunInfo


@pytest.mark.parametrize(("table", "columns"), [
    (t.runs, lite.RUN_COLUMNS), (t.run_parts, ("id", *lite.PART_COLUMNS, "finished_at", "exit_code", "interrupted",
                                               "counts")),
    (t.test_results, lite.TEST_COLUMNS), (t.test_runs, lite.RUN_ROW_COLUMNS),
    (t.assertions, ("id", *lite.ASSERTION_COLUMNS)),
])
def test_the_lite_writer_names_every_column_of_the_tables(table: Any, columns: tuple[str, ...]) -> None:
    assert sorted(columns) == sorted(column.name for column in table.columns)
    json_columns = {column.name for column in table.columns if column.type.__class__.__name__ == "JSON"}
    assert json_columns == lite.JSON_COLUMNS & set(columns)


def _records(tag: str) -> list[dict[str, Any]]:
    """Two finished tests as `test_record` shapes them: JSON columns, nulls, booleans, a waterfall."""
    def run(number: int, passed: bool) -> dict[str, Any]:
        transcript = [{"role": "user", "text": f"hi {tag} é", "turn": 1}, {"role": "agent", "text": "echo", "turn": 1}]
        return {"row": {"number": number, "attempt": 1, "status": "passed" if passed else "failed",
                        "error": None if passed else "boom", "fault": None, "fault_reason": None,
                        "end_reason": "script_done", "duration_ms": 12.5, "dir": f"t/run-{number}",
                        "target_type": "rest", "transcript": transcript, "transcript_hash": f"h{tag}{number}",
                        "trace_ids": ["a" * 32] if passed else None,
                        "spans": {1: {"turn": 1, "latency_ms": 3.0, "spans": []}} if passed else None,
                        "llm_cost_usd": None, "llm_tokens": 7, "metrics": {"turn_latency_ms_p95": 4.5},
                        "not_evaluated": None if passed else 2},
                "assertions": [{"name": "contains", "passed": passed, "reason": "" if passed else "no echo",
                                "score": None, "on_turn": None, "model": None, "prompt_version": None,
                                "fake": None},
                               {"name": "judge", "passed": True, "reason": "ok", "score": 0.5, "on_turn": "1",
                                "model": "fake", "prompt_version": "judge.v1", "fake": True}]}

    return [{"test": {"test_id": f"s/{name}", "suite": "s", "name": name, "case_name": None, "tags": ["smoke"],
                      "target": "bot", "status": status, "passed_runs": passed, "total_runs": 2,
                      "pass_threshold": None, "duration_ms": 30.0, "quarantine": None, "skip_reason": None,
                      "slo": {"turn_latency_ms_p95": 800.0} if name == "a" else None,
                      "stats": {"rate": 0.5} if name == "b" else None, "reason": None},
             "runs": [run(1, True), run(2, status == "passed")]}
            for name, status, passed in (("a", "passed", 2), ("b", "failed", 1))]


def _write(store: Store | lite.LiteStore, run_id: str) -> None:
    run = RunInfo(id=run_id, started_at="2026-12-03T10:00:00+00:00", commit="c0ffee", branch="main",
                  project="/p", tamesu_version="1")
    part = store.begin_part(run, PartInfo(dir=f"/runs/{run_id}", started_at=run.started_at, shard="1/2", host="h"))
    store.write_records(run, part, _records("x"))
    store.write_records(run, part, _records("y"))  # a second batch: ids continue after the first
    assert store.finish_part(part, "2026-12-03T10:01:00+00:00", 1, {"passed": 2, "failed": 2, "total": 4}, None) >= 1


def _read_back(url: str, run_id: str) -> tuple[Any, ...]:
    store = Store(url)
    reader = Reader(store)
    try:
        run = reader.run(run_id)
        loaded = reader.as_loaded_run(run_id)
        assert run is not None and loaded is not None
        histories = [[(h.status, h.slo, h.stats, [vars(r) for r in h.runs]) for h in reader.history(f"s/{name}")]
                     for name in ("a", "b")]
        with store.engine.connect() as connection:
            rows = [[tuple(row) for row in connection.execute(table.select().order_by(*table.primary_key))]
                    for table in (t.runs, t.run_parts, t.test_results, t.test_runs, t.assertions)]
        return (run.counts, run.finished, run.exit_code, run.shards, [r.model_dump() for r in loaded.results],
                histories, rows)
    finally:
        store.close()


def test_the_lite_writer_writes_what_sqlalchemys_writes(tmp_path: Path) -> None:
    urls = {}
    for kind in ("full", "lite"):
        urls[kind] = f"sqlite:///{tmp_path / kind}.db"
        created = Store(urls[kind])
        created.migrate()
        created.close()
    full = Store(urls["full"])
    _write(full, "r1")
    full.close()
    fast = lite.open_lite(urls["lite"])
    assert fast is not None
    fast.migrate()
    _write(fast, "r1")
    fast.close()
    assert _read_back(urls["lite"], "r1") == _read_back(urls["full"], "r1")


def test_both_writers_open_sqlite_with_the_same_settings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    store.migrate()
    asked = ("journal_mode", "synchronous", "foreign_keys")
    with store.engine.connect() as connection:
        full = [connection.exec_driver_sql(f"PRAGMA {name}").scalar() for name in asked]
    store.close()
    fast = lite.open_lite(url)
    assert fast is not None
    fast.migrate()
    connection = fast._connect()
    fast_settings = [connection.execute(f"PRAGMA {name}").fetchone()[0] for name in asked]
    fast.close()
    # WAL; synchronous NORMAL is 1 (the default FULL is 2); foreign keys on (off by default)
    assert full == fast_settings == ["wal", 1, 1]


def test_only_a_current_sqlite_store_is_written_without_sqlalchemy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    assert lite.open_lite("postgresql+psycopg://u@127.0.0.1:1/x") is None
    assert lite.open_lite(url + "?timeout=3") is None
    store = Store(url)
    store.migrate()
    store.close()
    assert isinstance(lite.open_lite(url), lite.LiteStore)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0003'")
    assert lite.open_lite(url) is None  # older: SQLAlchemy migrates it first
    path.write_bytes(b"not a database at all")
    assert lite.open_lite(url) is None


def _schema(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], str]:
    with sqlite3.connect(path) as connection:
        made = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid").fetchall()
        version = connection.execute("SELECT * FROM alembic_version").fetchall()
        journal = connection.execute("PRAGMA journal_mode").fetchone()[0]
    connection.close()
    return made, version, journal


def test_an_absent_store_is_created_as_the_migrations_create_it(tmp_path: Path) -> None:
    migrated = Store(f"sqlite:///{tmp_path / 'migrated.db'}")
    migrated.migrate()
    migrated.close()
    path = tmp_path / "new" / "folder" / "created.db"
    created = lite.open_lite(f"sqlite:///{path}")
    assert isinstance(created, lite.LiteStore) and created.create and path.parent.is_dir() and not path.exists()
    created.migrate()
    created.migrate()  # a second time changes nothing
    created.close()
    # the same tables, columns, indexes and their SQL text, in the same order: else schema.sql is older than the
    # migrations (python scripts/gen_store_schema.py)
    assert _schema(path) == _schema(tmp_path / "migrated.db")
    assert _schema(path)[1:] == ([(lite.HEAD_REVISION,)], "wal")
    again = Store(f"sqlite:///{path}")
    assert again.revision() == lite.HEAD_REVISION  # Alembic reads it as its own
    again.migrate()
    again.close()
    assert _schema(path) == _schema(tmp_path / "migrated.db")


def test_a_created_store_holds_what_sqlalchemys_holds(tmp_path: Path) -> None:
    full_url, lite_url = f"sqlite:///{tmp_path / 'full.db'}", f"sqlite:///{tmp_path / 'lite.db'}"
    full = Store(full_url)
    full.migrate()
    _write(full, "r1")
    full.close()
    fast = lite.open_lite(lite_url)
    assert fast is not None and fast.create
    fast.migrate()
    _write(fast, "r1")
    fast.close()
    assert _read_back(lite_url, "r1") == _read_back(full_url, "r1")


def _create_at_once(writers: list[Store | lite.LiteStore]) -> list[str]:
    """Every writer's `migrate` on a thread of its own, all at once; what failed, each as the writer and the
    lines of tamesu's code it failed in (a failure under load then says which path gave up)."""
    failed: list[str] = []

    def create(writer: Store | lite.LiteStore) -> None:
        try:
            writer.migrate()
        except BaseException as exc:  # said by the caller's assertion, on the test's thread
            where = "; ".join(line.strip() for line in traceback.format_exc().splitlines() if "/tamesu/" in line)
            failed.append(f"{type(writer).__name__}: {type(exc).__name__}: {str(exc).splitlines()[0]} ({where})")

    threads = [threading.Thread(target=create, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        # above the longest a writer may wait for another (the migration lock, then SQLite's), so a writer the
        # load slowed down fails on its own bound, said, rather than be left running here
        thread.join(2 * lite.SQLITE_WAIT_S + 30)
    for writer in writers:
        writer.close()
    assert not any(thread.is_alive() for thread in threads), failed
    return failed


def test_runs_that_create_one_store_at_once_make_its_tables_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    writers: list[Store | lite.LiteStore] = [lite.open_lite(url) or pytest.fail("no lite writer") for _ in range(3)]
    writers.append(Store(url))  # an older tamesu's way in, under the same lock
    assert _create_at_once(writers) == []
    assert _schema(tmp_path / "s.db")[1] == [(lite.HEAD_REVISION,)]
    assert sorted(p.name for p in tmp_path.iterdir() if "lock" in p.name) == []  # no s.db.migrate-lock left


def test_runs_that_create_one_store_while_another_makes_it_wait_for_it(tmp_path: Path) -> None:
    """The first connection to a new file switches it to WAL, a write that SQLite refuses at once, whatever the
    busy timeout, to a second connection switching it at the same moment: a run on a loaded machine (its disk
    slow to sync) made another fail with "database is locked". Here a run holds that switch for half a second
    (the migration lock, then the file's write lock, as a first connection switching it does) while three
    writers start: each waits for it, and the tables are made once."""
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    writers: list[Store | lite.LiteStore] = [lite.open_lite(url) or pytest.fail("no lite writer") for _ in range(2)]
    writers.append(Store(url))
    switching, done = threading.Event(), threading.Event()

    def first_connection() -> None:
        with lite._migration_lock(str(path)):
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            holder.execute("PRAGMA user_version = 0")
            switching.set()
            done.wait(0.5)
            holder.execute("ROLLBACK")
            holder.execute("PRAGMA journal_mode=WAL")
            holder.close()

    holder = threading.Thread(target=first_connection)
    holder.start()
    try:
        assert switching.wait(30)
        assert _create_at_once(writers) == []
    finally:
        done.set()
        holder.join(30)
    assert _schema(path)[1:] == ([(lite.HEAD_REVISION,)], "wal")
    assert sorted(p.name for p in tmp_path.iterdir() if "lock" in p.name) == []


def test_a_write_waits_for_another_writer_as_long_as_the_timeout_then_says_so(tmp_path: Path, monkeypatch) -> None:
    """Runs side by side on one store wait for each other: by default a minute (one CI run gave up after the 5 s
    it was), for SQLite's lock as for the migration lock; past it, one line naming the file and the wait."""
    monkeypatch.delenv("TAMESU_STORE_TIMEOUT", raising=False)
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    full, fast = Store(url), lite.open_lite(url)
    assert fast is not None
    full.migrate()
    fast.migrate()
    with full.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 60_000
    assert fast._connect().execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
    assert full.timeout == fast.timeout == lite.SQLITE_WAIT_S == 60
    full.close()
    fast.close()

    monkeypatch.setenv("TAMESU_STORE_TIMEOUT", "0.3")
    run = RunInfo(id="r1", started_at="2026-12-03T10:00:00+00:00", commit=None, branch=None, project="/p",
                  tamesu_version="1")
    part = PartInfo(dir="/runs/r1", started_at=run.started_at)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run's write, longer than the wait
    try:
        for writer in (Store(url), lite.open_lite(url) or pytest.fail("no lite writer")):
            writer.migrate()  # reads: WAL lets them past a writer
            started = time.monotonic()
            with pytest.raises(StoreLocked) as locked:
                writer.begin_part(run, part)
            waited = time.monotonic() - started
            writer.close()
            assert 0.3 <= locked.value.waited <= waited, (locked.value.waited, waited)
            assert str(locked.value) == (f"store: {path} stayed locked by another writer: waited "
                                         f"{locked.value.waited:.1f} s, the most a write waits (TAMESU_STORE_TIMEOUT)")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    new = str(tmp_path / "new.db")
    creator = lite.open_lite(f"sqlite:///{new}")
    assert creator is not None and creator.create
    taken, done = threading.Event(), threading.Event()

    def making() -> None:  # another run making the store, for longer than the wait
        with lite._migration_lock(new):
            taken.set()
            done.wait(30)

    maker = threading.Thread(target=making)
    maker.start()
    try:
        assert taken.wait(30)
        started = time.monotonic()
        with pytest.raises(StoreLocked) as locked:
            creator.migrate()
        assert 0.3 <= locked.value.waited <= time.monotonic() - started and locked.value.path == new
    finally:
        done.set()
        maker.join(30)
    creator.migrate()  # the lock let go: the store is made
    creator.close()
    assert _schema(Path(new))[1:] == ([(lite.HEAD_REVISION,)], "wal")


def test_the_migration_lock_leaves_no_file_and_is_held_by_one_at_a_time(tmp_path: Path) -> None:
    # its holder removes the file before letting go: a run that waited on the removed file must not take it
    # as held while another run locks the path's new one
    path = str(tmp_path / "s.db")
    inside, most, failed = [0], [0], []
    guard = threading.Lock()

    def take(times: int) -> None:
        try:
            for _ in range(times):
                with lite._migration_lock(path):
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.001)
                    with guard:
                        inside[0] -= 1
        except BaseException as exc:  # said by the assertion below, on the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=take, args=(40,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failed == [] and not any(thread.is_alive() for thread in threads)
    assert most[0] == 1
    assert list(tmp_path.iterdir()) == []


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


def test_runs_that_create_and_write_a_store_do_not_import_sqlalchemy(tmp_path: Path, serve) -> None:
    url = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).url
    (tmp_path / "suite.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat' }}\n"
        "tests:\n  - name: echo\n    target: bot\n    scenario: { script: [ { say: hello } ] }\n"
        "    assert: [ { contains: 'echo: hello' } ]\n")
    blocked = tmp_path / "blocked"
    for module in ("sqlalchemy", "alembic"):
        (blocked / module).mkdir(parents=True)  # a package that cannot be imported
        (blocked / module / "__init__.py").write_text(f"raise ImportError('No module named {module}')\n")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for name in ("TAMESU_STORE", "TAMESU_RUN_ID"):
        env.pop(name, None)

    def run(extra_path: str = "") -> subprocess.CompletedProcess[str]:
        paths = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH", "")) if p)
        return subprocess.run([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                              env={**env, "PYTHONPATH": paths}, capture_output=True, text=True, timeout=300)

    first = run(str(blocked))  # creates the store, without SQLAlchemy or Alembic, which cannot be imported
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in (tmp_path / ".tamesu").iterdir()) == ["store.db"]  # no store.db.migrate-lock
    assert "warning" not in first.stdout + first.stderr, first.stdout + first.stderr
    with sqlite3.connect(tmp_path / ".tamesu" / "store.db") as connection:
        assert connection.execute("SELECT count(*) FROM test_results").fetchone()[0] == 1
    connection.close()
    second = run(str(blocked))  # writes to the store the first made
    assert second.returncode == 0, second.stdout + second.stderr
    assert "warning" not in second.stdout + second.stderr, second.stdout + second.stderr
    assert "history: 2 runs in" in second.stdout
    reader = Reader(Store(f"sqlite:///{tmp_path / '.tamesu' / 'store.db'}"))
    runs = reader.runs()
    assert len(runs) == 2 and all(r.finished and r.counts["passed"] == 1 for r in runs)
    assert all(h.runs[0].transcript[1]["text"] == "echo: hello" for h in reader.history("suite/echo"))
