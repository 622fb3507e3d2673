"""`tamesu view` draws each turn's spans as the HTML report does (tamesu's turn on top, the agent's spans nested by
parent, a failed span marked, attributes on hover), from the results store: written by the run, and by
`tamesu store import`. Checked in Debian's Chromium through Playwright."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.traced import TracedRestAgent, free_port
from browser_fixtures import OWN_CHROMIUM
from view.conftest import View, stored_run

pytestmark = [pytest.mark.browser, OWN_CHROMIUM]  # its own Chromium: not the browser lane

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def traced_store(tmp_path_factory, ) -> Iterator[Path]:
    """A project whose store holds one run of an agent that traces its turns (its tool span fails)."""
    from tamesu.net.serve import ThreadServer

    root = tmp_path_factory.mktemp("view-traces")
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}", fail_tool=True)
    server = ThreadServer(agent.app()).start()
    try:
        (root / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: 300ms }}\n")
        (root / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{server.url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }} ] }}
""")
        done = stored_run(root)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        server.stop()
        agent.shutdown()
    yield root


def _stored_waterfalls(url: str) -> dict:
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    store = Store(url)
    try:
        [entry] = Reader(store).history("suite/order")
        return entry.runs[0].spans
    finally:
        store.close()


def test_the_store_keeps_each_turns_waterfall_and_import_does_too(traced_store: Path, tamesu) -> None:
    written = _stored_waterfalls(f"sqlite:///{traced_store / '.tamesu' / 'store.db'}")
    assert sorted(written) == ["1", "2"]
    assert [s["name"] for s in written["1"]["spans"]] == ["invoke_agent shop", "chat fake-model",
                                                         "execute_tool lookup_order"]
    assert written["1"]["failed"] == 1 and written["1"]["more"] == 0 and written["1"]["latency_ms"] > 0
    [run_dir] = list((traced_store / "out").iterdir())
    copy = f"sqlite:///{traced_store / 'copy.db'}"
    imported = tamesu(["store", "import", str(run_dir), "--store", copy], cwd=traced_store)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert _stored_waterfalls(copy) == written


def test_the_view_draws_each_turns_spans_under_the_turn(traced_store: Path, view: Callable[..., View]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    url = view(traced_store, "--no-open").url
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda request: requests.append(request.url))
        page.goto(url + "/test?id=suite/order")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        rows = page.evaluate("""[...document.querySelectorAll('.chat .waterfall')].map(w => {
            const agent = w.previousElementSibling;
            return {after: agent ? agent.className + ':' + agent.textContent : '',
                    said: w.querySelector('summary').textContent,
                    rows: [...w.querySelectorAll('.wf-row')].map(r => {
              const bar = r.querySelector('.wf-bar').getBoundingClientRect();
              const track = r.querySelector('.wf-track').getBoundingClientRect();
              return {name: r.querySelector('.wf-name').textContent, cls: r.className,
                      indent: parseFloat(getComputedStyle(r.querySelector('.wf-name')).paddingLeft),
                      left: bar.left - track.left, width: bar.width, track: track.width, title: r.title};
            })};
          })""")
        assert len(rows) == 2  # one waterfall under each agent turn
        first, second = rows
        assert first["after"].startswith("agent:agent: Sorry") and second["after"].startswith("agent:agent:")
        assert first["said"].startswith("3 agent spans, 1 failed")
        names = [r["name"] for r in first["rows"]]
        assert names == ["tamesu turn 1", "invoke_agent shop", "chat fake-model", "execute_tool lookup_order"]
        indents = [r["indent"] for r in first["rows"]]
        assert indents[0] < indents[1] < indents[2] == indents[3]  # nested by parent, as in the report
        for row in first["rows"]:
            assert row["width"] > 0 and row["left"] >= -0.5 and row["left"] + row["width"] <= row["track"] + 0.5
        tool = first["rows"][3]
        assert "wf-error" in tool["cls"] and "status error: order service down" in tool["title"]
        assert 'gen_ai.tool.call.arguments = {"order_id": "ORD-1001"}' in tool["title"]
        color = page.evaluate("getComputedStyle(document.querySelector('.wf-error .wf-bar')).backgroundColor")
        assert color == "rgb(201, 60, 60)"  # the report's CSS, served by the view
        assert [r["name"] for r in second["rows"]] == ["tamesu turn 2", "invoke_agent shop", "chat fake-model"]
        # under the agent's line, as wide as the transcript's lines at most, inside the history's cell
        fits = page.evaluate("""[...document.querySelectorAll('.chat .waterfall')].every(w => {
            const box = w.getBoundingClientRect(), cell = w.closest('td').getBoundingClientRect();
            return box.width > 200 && box.right <= cell.right + 0.5; })""")
        assert fits is True
        browser.close()
    assert requests and all(r.startswith(url + "/") for r in requests)
