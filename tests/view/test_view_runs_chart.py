"""`tamesu view`'s runs page read as a user reads it, in Debian's Chromium (the session's shared one): the
pass-rate bars stand on a 0-100 % axis, the runs' axis says oldest to newest and how many, and every bar's
rate is printed above it and given on hover with its run. Three real runs against a local agent whose one test
fails every other time fill the store (50 %, 100 %, 50 %); a screenshot of the page is kept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from browser_fixtures import shared_chromium
from tamesu.net.serve import ThreadServer
from tamesu.view._charts import pass_rate_bars
from view.conftest import View, stored_run

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")

FIXTURES = (shared_chromium,)
"""Session fixtures of browser_fixtures, used by name below."""

SUITE = """\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: steady
    target: bot
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ contains: echo }} ]
  - name: wobbly
    target: bot
    scenario: {{ script: [ {{ say: wobble }} ] }}
    assert: [ {{ contains: good }} ]
"""


def _agent() -> Starlette:
    calls = {"wobble": 0}

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if message == "wobble":
            calls["wobble"] += 1
            return JSONResponse({"text": "bad" if calls["wobble"] % 2 else "good"})
        return JSONResponse({"text": f"echo: {message}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("view-runs")
    server = ThreadServer(_agent()).start()
    try:
        (root / "suite.yaml").write_text(SUITE.format(url=server.url))
        (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
        for expected in (1, 0, 1):
            done = stored_run(root)
            assert done.returncode == expected, done.stdout + done.stderr
    finally:
        server.stop()
    yield root


@pytest.mark.browser
def test_the_runs_page_bars_have_axes_and_values(three_runs: Path, shared_chromium: str, tmp_path: Path,
                                                 view: Callable[..., View]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    url = view(three_runs, "--no-open").url
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(shared_chromium)
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        page.goto(url + "/")
        assert page.inner_text("h1") == "Runs"
        page.screenshot(path=str(tmp_path / "runs-page.png"), full_page=True)

        chart = page.locator("svg.pass-rate")
        assert chart.count() == 1
        assert chart.get_attribute("aria-label") == "pass rate of the last 3 runs, from 50% to 100%"
        labels = chart.locator("text.axis-label").all_text_contents()
        assert labels[:3] == ["100%", "50%", "0%"] and "oldest" in labels and "newest" in labels
        assert "3 runs" in labels
        assert chart.locator("text.value").all_text_contents() == ["50%", "100%", "50%"]
        # each bar's rate on hover, with its run; the table lists the newest first, the chart oldest first
        run_ids = [cell.inner_text() for cell in page.locator("main table tbody tr td:first-child a").all()]
        hovered = chart.locator("rect.s-passed title").all_text_contents()
        assert hovered == [f"{run}: {rate} passed" for run, rate in
                           zip(reversed(run_ids), ["50%", "100%", "50%"], strict=True)]

        # drawn as read: the values sit above the plot, inside the chart, and the bars keep their share
        box = chart.bounding_box()
        assert box is not None and box["width"] > 300
        for value in chart.locator("text.value").all():
            inside = value.bounding_box()
            assert inside is not None and box["y"] <= inside["y"] and \
                inside["y"] + inside["height"] <= box["y"] + box["height"]
        heights = [rect.bounding_box()["height"] for rect in chart.locator("rect.s-passed").all()]  # type: ignore[index]
        assert heights[1] == pytest.approx(2 * heights[0], rel=0.02) and heights[0] == pytest.approx(heights[2])
        context.close()
    assert (tmp_path / "runs-page.png").stat().st_size > 10_000


def test_a_run_where_nothing_ran_is_a_gap_that_says_so() -> None:
    svg = pass_rate_bars([("run a", 0.25), ("run b", None)])
    assert ">25%</text>" in svg and "<title>run a: 25% passed</title>" in svg
    assert "<title>run b: no test ran</title>" in svg and svg.count("<rect") == 2
    assert pass_rate_bars([]) == ""
    many = pass_rate_bars([(f"run {i}", 1.0) for i in range(30)])  # too many to print: on hover only
    assert 'class="value"' not in many and many.count("<title>run ") == 60
