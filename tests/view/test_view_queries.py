"""Every `tamesu view` page reads the store in a fixed number of statements, however many runs, tests and
judge-drift cases it shows (no read per row: on a loaded machine each round trip is what made pages slow)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event

from tamesu.net.serve import ThreadServer
from tamesu.store.db import Store
from tamesu.store.records import PartInfo, RunInfo
from tamesu.view.app import create_app


def _record(test: int, run: int) -> dict[str, Any]:
    """A test graded by a judge whose model changes every run and whose verdict changes with it: every test
    is a drift case."""
    passed = run % 2 == 0
    transcript = [{"role": "user", "text": f"refund {test}", "turn": 1}, {"role": "agent", "text": "ok", "turn": 1}]
    return {"test": {"test_id": f"s/t{test}", "suite": "s", "name": f"t{test}", "status": "passed" if passed else
                     "failed", "passed_runs": int(passed), "total_runs": 1, "duration_ms": 5.0},
            "runs": [{"row": {"number": 1, "attempt": 1, "status": "passed" if passed else "failed",
                              "dir": f"s/t{test}/run-1", "transcript": transcript, "transcript_hash": f"hash-{test}",
                              "metrics": {"turn_latency_ms_p95": 10.0 + run}},
                      "assertions": [{"name": "judge", "passed": passed, "reason": "r", "score": float(passed),
                                      "model": f"fake:m{run % 2}", "prompt_version": "v1"}]}]}


def _store(path: Path, runs: int, tests: int) -> Store:
    store = Store(f"sqlite:///{path}")
    store.migrate()
    for number in range(runs):
        run = RunInfo(id=f"r{number}", started_at=f"2026-01-{number + 1:02d}T00:00:00", commit=f"c{number // 2}")
        part = store.begin_part(run, PartInfo(dir=f"/runs/r{number}", started_at=run.started_at))
        store.write_records(run, part, [_record(test, number) for test in range(tests)])
        store.finish_part(part, run.started_at, 0, {"total": tests, "passed": tests}, None)
    return store


@contextmanager
def _counted(store: Store) -> Iterator[list[str]]:
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        yield statements
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)


PAGES = ["/", "/tests", "/test?id=s/t1", "/run?id=r1", "/compare?a=r0&b=r1", "/compare", "/drift"]


def _statements_per_page(store: Store) -> dict[str, int]:
    server = ThreadServer(create_app(store)).start()
    counts = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for page in PAGES:
                with _counted(store) as statements:
                    response = client.get(page)
                assert response.status_code == 200, page
                counts[page] = len(statements)
    finally:
        server.stop()
    return counts


def test_each_page_reads_in_a_fixed_number_of_statements(tmp_path: Path) -> None:
    small = _store(tmp_path / "small.db", 2, 2)
    large = _store(tmp_path / "large.db", 6, 12)
    try:
        few, many = _statements_per_page(small), _statements_per_page(large)
    finally:
        small.close()
        large.close()
    assert few == many, (few, many)
    assert max(many.values()) <= 12, many


def test_drift_finds_every_case_in_one_read_of_verdicts(tmp_path: Path) -> None:
    from tamesu.store.queries import Reader

    store = _store(tmp_path / "s.db", 3, 5)
    try:
        with _counted(store) as statements:
            cases = Reader(store).drift()
        assert sorted(case.test_id for case in cases) == [f"s/t{n}" for n in range(5)]
        assert all([v["run_id"] for v in case.verdicts] == ["r0", "r1", "r2"] for case in cases)
        assert all(case.transcript[0]["text"] == f"refund {case.test_id[3:]}" for case in cases)
        assert len(statements) == 3, statements  # the window, the cases, their verdicts
    finally:
        store.close()


def test_the_runs_page_says_how_a_run_that_was_not_its_verdicts_ended(tmp_path: Path, view) -> None:
    # before: a run interrupted (or stopped by its budget, or broken) showed only the pass rate of what finished:
    # an interrupted run with two passing tests read as a green 100 %
    import httpx

    from view.conftest import stored_run

    (tmp_path / "s.tamesu.yaml").write_text(
        "hooks: { after_all: [ 'true' ] }\n"
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        "budget: { tokens: 1 }\n"
        "tests:\n  - { name: greets, scenario: { script: [ { say: hi } ] } }\n"
        "  - { name: again, scenario: { script: [ { say: hi } ] } }\n")
    done = stored_run(tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    page = httpx.get(view(tmp_path, "--no-open").url + "/", timeout=10).text
    assert "exit 4: the budget ran out" in page, page[-3000:]
