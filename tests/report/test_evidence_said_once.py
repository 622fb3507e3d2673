"""A failure's evidence is shown beneath its reason in JUnit, the HTML report and pytest's output; when the reason
quotes it already (`turn 1 said: "…arriving Friday."` over `evidence: …arriving Friday.`, `found "shipped"` over
`evidence: "shipped"`, golden's least similar turn) it was said twice. result.json keeps every item."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import forked
from example_shop import example_shop

SUITE = """\
name: evidence
targets:
  shop:
    type: rest
    url: "{{env.SHOP_URL}}/chat"
    request: { body: { message: "{{message}}", session_id: "{{session}}" } }
    response: { text: $.reply, tool_calls: $.tool_calls }
tests:
  - name: order
    target: shop
    scenario: { script: [ { say: "Hi, where is my order ORD-1001?" } ] }
    assert:
      - not_contains: Friday
      - json_path: { path: "$.order.status", equals: delivered }
      - golden: { file: order.txt, mode: similar }
      - not_regex: sneakers
"""


def test_evidence_the_reason_quotes_is_not_said_again(tmp_path: Path) -> None:
    with example_shop(tmp_path) as (shop, url):
        (shop / "e.tamesu.yaml").write_text(SUITE, encoding="utf-8")
        (shop / "order.txt").write_text("user: Hi, where is my order ORD-1001?\nagent: It is lost.\n")
        done = forked.run(["run", "e.tamesu.yaml", "--out", "out", "--report", "junit,html"], shop,
                          {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": "off", "SHOP_URL": url}, 120)
    assert done.returncode == 1, done.stdout + done.stderr
    [run] = list((shop / "out").iterdir())
    [result] = run.rglob("result.json")
    kept = {a["name"]: a["evidence"] for a in json.loads(result.read_text())["assertions"]}
    turn = "Order ORD-1001 (blue sneakers) is shipped, arriving Friday."
    assert kept == {"not_contains": ["…(blue sneakers) is shipped, arriving Friday."], "json_path": ['"shipped"'],
                    "golden": [f'expected "It is lost.", found "{turn}"'], "not_regex": [turn]}, kept
    junit = html.unescape((run / "junit.xml").read_text())
    # only not_regex's: its reason quotes the match ("sneakers"), the evidence the whole turn
    assert re.findall(r"evidence: (.*)", junit) == [turn], junit
    report = (run / "report.html").read_text()
    assert [html.unescape(q) for q in re.findall(r"<blockquote>(.*?)</blockquote>", report)] == [turn], report
