"""`tamesu view` in Debian's Chromium through Playwright: a store filled by real runs, every page rendered,
the flaky test listed, the regression in a comparison, judge drift, and no request leaving 127.0.0.1."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from browser_fixtures import OWN_CHROMIUM
from view.conftest import View, stored_run

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

SUITE = """\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: flaky
    target: bot
    scenario: {{ script: [ {{ say: flaky }} ] }}
    assert: [ {{ contains: good }} ]
  - name: judged
    target: bot
    scenario: {{ script: [ {{ say: "refund please" }} ] }}
    assert: [ {{ judge: {{ rubric: "The agent answers the request", scale: "1-5" }} }} ]
"""

JUDGE = ("suites: ['suite.yaml']\ntrace_url: 'http://127.0.0.1:9/trace/{{trace_id}}'\n"
         "models:\n  judge: {{ provider: fake, model: {model}, rules: [ {{ transcript: 'refund', pass: true, "
         "score: {score}, reason: '{reason}' }} ] }}\n")


def _agent_app() -> Starlette:
    calls = {"flaky": 0}

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if message == "flaky":
            calls["flaky"] += 1
            return JSONResponse({"text": "good" if calls["flaky"] % 2 else "bad"})
        return JSONResponse({"text": f"echo: {message}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Iterator[Path]:
    """Two runs on one commit: `flaky` passes then fails; `judged` is graded by two judges differently."""
    from tamesu.net.serve import ThreadServer

    root = tmp_path_factory.mktemp("view")
    server = ThreadServer(_agent_app()).start()
    try:
        (root / "suite.yaml").write_text(SUITE.format(url=server.url))
        for model, score, reason in (("strict-judge", 4, "barely"), ("lenient-judge", 5, "clearly")):
            (root / "tamesu.yaml").write_text(JUDGE.format(model=model, score=score, reason=reason))
            done = stored_run(root, env={"TAMESU_COMMIT": "abc1234def"})
            assert done.returncode in (0, 1), done.stdout + done.stderr
            # no pause between the runs: run folders sort in start order even within one second (bc87877), and
            # the store orders runs by a start time kept to the microsecond
    finally:
        server.stop()
    yield root


@pytest.mark.browser
@OWN_CHROMIUM  # its own Chromium: not the browser lane
def test_view_pages_in_chromium(history: Path, view: Callable[..., View]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    url = view(history, "--no-open").url
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        page.on("request", lambda request: requests.append(request.url))

        page.goto(url + "/")
        assert page.inner_text("h1") == "Runs"
        rows = page.locator("main table tbody tr")
        assert rows.count() == 2
        assert "50%" in rows.nth(0).inner_text() and "100%" in rows.nth(1).inner_text()
        assert page.locator("svg.chart rect").count() == 4

        page.click("header >> text=Tests")
        assert page.inner_text("h1") == "Tests"
        assert "1 flaky test(s)" in page.inner_text("main")
        flaky_row = page.locator("tr", has_text="suite/flaky")
        assert "flaky" in flaky_row.locator(".tag").inner_text()
        assert "abc1234def" in flaky_row.inner_text()
        assert page.locator("tr", has_text="suite/judged").locator(".tag").count() == 0

        page.click("text=suite/flaky")
        assert page.inner_text("h1") == "suite/flaky"
        assert page.locator("details").first.get_attribute("open") is not None  # the newest transcript, open
        chat = page.locator(".chat").first.inner_text()
        assert "user: flaky" in chat and "agent: bad" in chat
        # each turn's trace id, linked through tamesu.yaml's trace_url (never followed here)
        assert page.locator('a[href^="http://127.0.0.1:9/trace/"]').count() >= 2
        assert "turn_latency_ms" in page.inner_text("main")
        assert page.locator("svg.trend").count() >= 1

        page.click("header >> text=Compare")
        assert page.inner_text("h1") == "Compare"
        text = page.inner_text("main")
        assert "1 regression" in text
        regressions = page.locator("h2:has-text('Regressions') + table")
        assert "suite/flaky" in regressions.inner_text() and "failed" in regressions.inner_text()

        page.click("header >> text=Judge drift")
        drift = page.inner_text("main")
        assert "suite/judged" in drift and "strict-judge" in drift and "lenient-judge" in drift
        assert "barely" in drift and "clearly" in drift
        browser.close()
    assert requests, "the browser made no request"
    foreign = [r for r in requests if not r.startswith(url + "/")]
    assert foreign == []


def test_view_opens_the_browser_unless_told_not_to(history: Path, tmp_path: Path,
                                                   view: Callable[..., View]) -> None:
    opened = tmp_path / "opened"
    fake_browser = tmp_path / "browser.sh"
    fake_browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    fake_browser.chmod(0o755)
    started = view(history, env={"BROWSER": str(fake_browser)})
    url = started.url
    try:
        deadline = time.monotonic() + 20
        # the shell makes the file, then writes the line: read it once the line is whole
        while time.monotonic() < deadline and not (opened.exists() and opened.read_text().endswith("\n")):
            time.sleep(0.05)
        assert opened.read_text().strip() == url + "/"
        assert httpx.get(url + "/tests", timeout=5).status_code == 200
        missing = httpx.get(url + "/test", params={"id": "suite/nope"}, timeout=5)
        assert missing.status_code == 404 and "no results in the store" in missing.text
    finally:
        started.stop()
    assert started.process.returncode is not None
