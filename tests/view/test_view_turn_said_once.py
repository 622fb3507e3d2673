"""A check scoped to one turn (`on_turn: 1`) is said with its turn beside it (`json_path (turn 1): ...`); its own
reason named the turn again (`json_path (turn 1): $.order.status in turn 1: ...`) on the console, in JUnit, the
HTML report and `tamesu view`. Now the label says the turn and the reason says where in it it looked."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import httpx

import forked
from example_shop import example_shop

SAID = 'json_path (turn 1): $.order.status in the response: expected "shipped", found "in transit"'
REASON = SAID.split(": ", 1)[1]


def test_a_check_on_one_turn_says_the_turn_once_everywhere(tmp_path: Path, view: Any) -> None:
    with example_shop(tmp_path, {'"status": "shipped"': '"status": "in transit"'}) as (shop, url):
        done = forked.run(["run", "--filter", "order status", "--out", "out", "--report", "junit,html"], shop,
                          {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": "true", "SHOP_URL": url}, 120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"✗ {SAID}" in done.stdout, done.stdout
    [run] = list((shop / "out").iterdir())
    junit = html.unescape((run / "junit.xml").read_text())
    report = html.unescape(re.sub(r"<[^>]+>", " ", (run / "report.html").read_text()))
    served = view(shop)
    history = html.unescape(re.sub(r"<[^>]+>", " ", httpx.get(f"{served.url}/test", timeout=30,
                                                              params={"id": "rest-shop/order status"}).text))
    for said in (done.stdout, junit, report, history):
        assert REASON in said, said
        assert "in turn 1" not in said, said  # said once, beside the check
    assert SAID in junit
    assert re.search(r"json_path\s+\(?turn 1\)?\s+" + re.escape(REASON), report), report
    assert re.search(r"json_path\s+\(turn 1\)\s+failed\s+" + re.escape(REASON), history), history
