"""The waterfall of each turn's spans in the HTML report, checked in headless Chromium: tamesu's turn on top,
the agent's spans nested by parent on the turn's clock, a failed span marked, the attributes on hover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.traced import TracedRestAgent, free_port
from cdp import Browser, chromium_binary

pytestmark = pytest.mark.browser


@pytest.mark.skipif(chromium_binary() is None,
                    reason="no chromium binary: install Debian's chromium (apt-get install -y chromium)")
def test_each_turn_shows_its_spans_as_a_waterfall(tmp_path: Path, tamesu, serve) -> None:
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}", fail_tool=True)
    try:
        url = serve(agent.app()).url
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\n"
                                              f"traces: {{ receive: '{receive}', wait: 200ms }}\n"
                                              "trace_url: 'http://jaeger.local/trace/{trace_id}'\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }} ] }}
    assert:
      - {{ name: no failed span, span: {{ status: error, count: {{ equals: 0 }} }} }}
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 1, result.stdout + result.stderr  # the tool's span failed
    run_dir = next((tmp_path / "out").iterdir())
    detail = json.loads((run_dir / "suite" / "order" / "run-1" / "result.json").read_text())
    assert detail["metrics"]["agent_errors_total"] == 1
    report = run_dir / "report.html"
    binary = chromium_binary()
    assert binary is not None
    browser = Browser(binary, tmp_path / "profile")
    try:
        page = browser.open_page(390, 844, mobile=True)
        browser.call("Page.navigate", {"url": report.as_uri()}, page)
        browser.wait_for("Page.loadEventFired")
        browser.evaluate(page, "document.querySelectorAll('details').forEach(d => d.open = true)")
        rows = browser.evaluate(page, """[...document.querySelectorAll('.waterfall')].map(w =>
            [...w.querySelectorAll('.wf-row')].map(r => {
              const bar = r.querySelector('.wf-bar').getBoundingClientRect();
              const track = r.querySelector('.wf-track').getBoundingClientRect();
              return {name: r.querySelector('.wf-name').textContent, cls: r.className,
                      depth: getComputedStyle(r).getPropertyValue('--depth').trim(),
                      indent: parseFloat(getComputedStyle(r.querySelector('.wf-name')).paddingLeft),
                      left: bar.left - track.left, width: bar.width, track: track.width, title: r.title};
            }))""")
        assert len(rows) == 2  # one waterfall per agent turn
        first = rows[0]
        assert [r["name"] for r in first] == ["tamesu turn 1", "invoke_agent shop", "chat fake-model",
                                              "execute_tool lookup_order"]
        assert [r["depth"] for r in first] == ["0", "1", "2", "2"]
        assert first[1]["indent"] < first[2]["indent"] == first[3]["indent"]  # nested by parent
        for row in first:
            assert row["width"] > 0 and row["left"] >= -0.5 and row["left"] + row["width"] <= row["track"] + 0.5
        assert first[3]["left"] >= first[2]["left"]  # the tool ran after the model call
        tool = first[3]
        assert "wf-error" in tool["cls"] and "status error: order service down" in tool["title"]
        assert 'gen_ai.tool.call.arguments = {"order_id": "ORD-1001"}' in tool["title"]
        assert [r["name"] for r in rows[1]] == ["tamesu turn 2", "invoke_agent shop", "chat fake-model"]
        text = browser.evaluate(page, "document.body.innerText")
        assert "3 agent spans, 1 failed" in text and "2 agent spans" in text
        # the trace link stays beside the waterfall
        assert browser.evaluate(page, "document.querySelectorAll('a.trace').length") == 2
        assert browser.evaluate(page, "document.documentElement.scrollWidth <= window.innerWidth") is True
        assert browser.console_errors() == []
    finally:
        browser.close()
