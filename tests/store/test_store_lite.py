"""A run writes a current SQLite store through the standard library (`store.lite`), without SQLAlchemy: the
same rows as SQLAlchemy's writer, read back the same by the view; an absent or older store still goes through
SQLAlchemy, which creates or migrates it; and a second run really does not import SQLAlchemy."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.store import _tables as t
from tamesu.store import lite
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
    assert lite.open_lite(url) is None  # absent: SQLAlchemy creates it
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


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


def test_a_run_on_a_current_store_does_not_import_sqlalchemy(tmp_path: Path, serve) -> None:
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

    first = run()  # creates the store, through SQLAlchemy and Alembic
    assert first.returncode == 0 and "warning" not in first.stdout, first.stdout + first.stderr
    second = run(str(blocked))  # SQLAlchemy cannot be imported: the run still writes its history
    assert second.returncode == 0, second.stdout + second.stderr
    assert "warning" not in second.stdout + second.stderr, second.stdout + second.stderr
    assert "history: 2 runs in" in second.stdout
    reader = Reader(Store(f"sqlite:///{tmp_path / '.tamesu' / 'store.db'}"))
    runs = reader.runs()
    assert len(runs) == 2 and all(r.finished and r.counts["passed"] == 1 for r in runs)
    assert all(h.runs[0].transcript[1]["text"] == "echo: hello" for h in reader.history("suite/echo"))
