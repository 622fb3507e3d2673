"""Root cause first in the run history: a run whose conversation failed (a local agent answering HTTP 500 on
turn 2) keeps in the store how many checks it kept from grading, in a store made before that column existed
(revision 0003, migrated by the run) and in one `tamesu store import` fills, and `tamesu view` says it on the
run page and the test page as the reports do."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from tamesu.net.serve import ThreadServer
from view.conftest import View

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")

LINE = "5 checks not evaluated: the conversation failed first"


async def _chat(request: Request) -> JSONResponse:
    message = str((await request.json()).get("message", ""))
    if message == "crash":
        return JSONResponse({"detail": "database is down"}, status_code=500)
    return JSONResponse({"text": f"echo: {message}"})


def _suite(url: str) -> dict[str, object]:
    return {
        "name": "cause",
        "defaults": {"slo": {"turn_latency_ms_p95": 10_000}},
        "targets": {"bot": {"type": "rest", "url": f"{url}/chat", "response": {"text": "$.text"}}},
        "tests": [
            {"name": "breaks", "target": "bot",
             "scenario": {"script": [{"say": "hello"}, {"say": "crash"}, {"say": "bye"}]},
             # 2 checks on turn 1 are graded; 4 assertions and the SLO are not
             "assert": [{"contains": "echo: hello", "on_turn": 1}, {"contains": "nope", "on_turn": 1},
                        {"contains": "echo: crash"}, {"contains": "echo: bye", "on_turn": 3},
                        {"not_contains": "sorry"}, {"metric": {"name": "turns", "gte": 3}}]},
            {"name": "fine", "target": "bot", "scenario": {"script": [{"say": "hi"}]},
             "assert": [{"contains": "echo: hi"}]},
        ],
    }


def _store_at_0003(path: Path) -> None:
    """The schema as tamesu made it before not_evaluated was kept."""
    from alembic import command
    from alembic.config import Config

    import tamesu.store
    from tamesu.store.db import Store

    path.parent.mkdir(parents=True)
    store = Store(f"sqlite:///{path}")
    config = Config()
    config.set_main_option("script_location", str(Path(tamesu.store.__file__).parent / "migrations"))
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0003")
    assert store.revision() == "0003"
    store.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("view-not-evaluated")
    server = ThreadServer(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).start()
    try:
        (root / "suite.yaml").write_text(json.dumps(_suite(server.url), indent=2))
        (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
        _store_at_0003(root / ".tamesu" / "store.db")
        done = run_tamesu(["run", "--out", "out"], root, env={"TAMESU_STORE": "true"})
        assert done.returncode == 1, done.stdout + done.stderr
        assert LINE in done.stdout
        assert "store:" not in done.stdout + done.stderr, done.stdout + done.stderr  # no store warning
    finally:
        server.stop()
    yield root


def test_the_store_keeps_not_evaluated_after_migrating(project: Path) -> None:
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    store = Store(f"sqlite:///{project / '.tamesu' / 'store.db'}")
    try:
        assert store.revision() == "0004"
        [run] = Reader(store).runs()
        [entry] = Reader(store).history("cause/breaks")
        assert [(r.status, r.not_evaluated) for r in entry.runs] == [("failed", 5)]
        [fine] = Reader(store).history("cause/fine")
        assert [r.not_evaluated for r in fine.runs] == [0]
        loaded = Reader(store).as_loaded_run(run.id)
        assert loaded is not None
        assert {r.id: r.runs[0].not_evaluated for r in loaded.results} == {"cause/breaks": 5, "cause/fine": 0}
    finally:
        store.close()


def test_store_import_keeps_not_evaluated_too(project: Path, tmp_path: Path) -> None:
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    copy = f"sqlite:///{tmp_path / 'imported.db'}"
    done = run_tamesu(["store", "import", str(project / "out"), "--store", copy], project)
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(copy)
    try:
        [entry] = Reader(store).history("cause/breaks")
        assert [r.not_evaluated for r in entry.runs] == [5]
    finally:
        store.close()


def test_view_says_it_on_the_run_and_test_pages(project: Path, view: Callable[..., View]) -> None:
    url = view(project, "--no-open").url
    runs = httpx.get(url + "/", timeout=10).text
    run_id = runs.split('href="/run?id=', 1)[1].split('"', 1)[0]
    run_page = httpx.get(url + "/run", params={"id": run_id}, timeout=10)
    assert run_page.status_code == 200
    row = run_page.text.split("cause/breaks", 1)[1].split("</tr>", 1)[0]
    assert "conversation: turn 2: the agent answered HTTP 500" in row
    assert f'<br><span class="not-evaluated">{LINE}</span>' in row
    assert run_page.text.count("not evaluated") == 1  # the test that passed says nothing
    test_page = httpx.get(url + "/test", params={"id": "cause/breaks"}, timeout=10)
    assert f'<p class="note not-evaluated">{LINE}</p>' in test_page.text
    fine_page = httpx.get(url + "/test", params={"id": "cause/fine"}, timeout=10)
    assert "not evaluated" not in fine_page.text
