"""`tamesu view`'s test page read as a user reads it, in Debian's Chromium (the session's shared one): the
transcripts come first, each chart has a value axis with its unit and min/max, the runs' axis and every
point's value, and a metric that never changed is one line instead of a flat chart. Three real runs against
a local agent fill the store; a screenshot of the page is kept in the test's folder."""

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
from tamesu.view._charts import constant_line, trend, unit, value_text
from view.conftest import View, stored_run

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")

FIXTURES = (shared_chromium,)
"""Session fixtures of browser_fixtures, used by name below."""

SUITE = """\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: greets
    target: bot
    scenario: {{ script: [ {{ say: hello }}, {{ say: "and again" }} ] }}
    assert: [ {{ contains: echo }} ]
"""


async def _chat(request: Request) -> JSONResponse:
    message = str((await request.json()).get("message", ""))
    return JSONResponse({"text": f"echo: {message}"})


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("view-charts")
    server = ThreadServer(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).start()
    try:
        (root / "suite.yaml").write_text(SUITE.format(url=server.url))
        (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
        for _ in range(3):
            done = stored_run(root)
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        server.stop()
    yield root


@pytest.mark.browser
def test_the_test_page_has_transcripts_first_and_charts_with_axes_and_values(
        three_runs: Path, shared_chromium: str, tmp_path: Path, view: Callable[..., View]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    url = view(three_runs, "--no-open").url
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(shared_chromium)
        context = browser.new_context(viewport={"width": 1100, "height": 1400})
        page = context.new_page()
        page.goto(url + "/test?id=suite/greets")
        assert page.inner_text("h1") == "suite/greets"
        page.screenshot(path=str(tmp_path / "test-page.png"), full_page=True)

        # the newest transcript is open, and above every chart
        assert page.locator(".chat").first.is_visible()
        assert "user: hello" in page.locator(".chat").first.inner_text()
        transcript_first = page.evaluate(
            "() => { const chat = document.querySelector('.chat'), chart = document.querySelector('svg.chart');"
            " return !!chat && !!chart && !!(chat.compareDocumentPosition(chart) & "
            "Node.DOCUMENT_POSITION_FOLLOWING); }")
        assert transcript_first

        latency = page.locator("svg.trend[aria-label^='turn_latency_ms ']")
        assert latency.count() == 1
        labels = latency.locator("text.axis-label").all_text_contents()
        assert any(label.endswith(" ms") for label in labels), labels  # min and max with their unit
        assert "oldest" in labels and "newest" in labels and "3 runs (ms)" in labels
        values = latency.locator("text.value").all_text_contents()
        assert len(values) == 3 and all(value.endswith(" ms") for value in values), values
        hovered = latency.locator("circle title").all_text_contents()
        assert [text.split(": ")[1] for text in hovered] == values

        # `turns` is 2 in every run: one line, no chart
        assert page.locator("svg.trend[aria-label^='turns ']").count() == 0
        folded = page.locator("ul.constants li", has_text="turns").inner_text()
        assert folded == "turns is constant: 2 in all 3 runs"
        context.close()
    assert (tmp_path / "test-page.png").stat().st_size > 10_000


def test_units_values_and_folding() -> None:
    assert [unit(n) for n in ("turn_latency_ms_p95", "llm_cost_usd", "llm_tokens", "turns", "pass^3")] == \
        ["ms", "USD", "tokens", "", ""]
    assert value_text(12.0, "ms") == "12 ms" and value_text(0.0123456, "USD") == "$0.01235"
    assert constant_line("turns", [2.0, 2.0]) == \
        '<li class="constant"><code>turns</code> is constant: 2 in all 2 runs</li>'
    svg = trend([10.0, 30.0], ["run a", "run b"], "turn_latency_ms", limit=20.0)
    assert ">30 ms</text>" in svg and ">0 ms</text>" in svg  # the value axis: max and min
    assert 'class="bad"' in svg and "<title>run b: 30 ms</title>" in svg  # over the SLO, named on hover
