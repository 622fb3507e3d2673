"""A repeated test's verdict over every run (an adaptive test undecided at its last run) is what the history
says of it: the store gives back its reason, statistics and threshold, and `tamesu view`'s run page gives that
reason as the "why" (it gave run 1's failed check, as if one run had decided it); its runs both passing and
failing mark it flaky on the Tests page, without git too (it said 0 flaky tests)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.net.serve import ThreadServer
from view.conftest import View, stored_run

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


def test_an_undecided_adaptive_tests_why_is_its_verdict(tmp_path: Path, view: Callable[..., View]) -> None:
    asked = itertools.count(1)

    async def chat(request: Request) -> JSONResponse:
        # three of every four answers are right: 15 of 20, undecided against 0.8
        return JSONResponse({"text": "booked" if next(asked) % 4 else "sorry"})

    server = ThreadServer(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).start()
    try:
        (tmp_path / "suite.yaml").write_text(f"""
name: flaky
targets:
  bot: {{ type: rest, url: "{server.url}/chat", response: {{ text: $.text }} }}
tests:
  - name: books
    repeat: 20
    pass_threshold: 0.8
    adaptive: {{ min_runs: 5 }}
    scenario: {{ script: [ {{ say: book it }} ] }}
    assert: [ {{ contains: booked }} ]
""")
        (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
        done = stored_run(tmp_path)
        assert done.returncode == 1, done.stdout + done.stderr
    finally:
        server.stop()
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    store = Store(f"sqlite:///{tmp_path / '.tamesu' / 'store.db'}")
    try:
        [run] = Reader(store).runs()
        loaded = Reader(store).as_loaded_run(run.id)
        assert loaded is not None
        [result] = loaded.results
        assert result.reason is not None and result.reason.startswith("undecided at 20 runs: rate 0.75 ["), result
        assert result.stats is not None and result.stats.runs == 20 and result.pass_threshold == 0.8
        assert {r.fault for r in result.runs if r.status == "failed"} == {"agent"}
    finally:
        store.close()
    url = view(tmp_path, "--no-open").url
    page = httpx.get(url + "/run", params={"id": run.id}, timeout=10)
    row = page.text.split("flaky/books", 1)[1].split("</tr>", 1)[0]
    assert "undecided at 20 runs: rate 0.75 [" in row, row
    # passed and failed among its own repeats: flaky on that code, with no git commit to compare runs by
    tests = httpx.get(url + "/tests", timeout=10).text
    assert "1 flaky test(s)" in tests and "These runs have no commit (not a git checkout)" in tests, tests
    row = tests.split("flaky/books", 1)[1].split("</tr>", 1)[0]
    assert '<span class="tag">flaky</span> its repeats' in row, row
