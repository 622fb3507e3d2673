"""The Markdown summary (GitHub's job summary) shows an agent's words and a test's name as they were written.

Before, only `|` was escaped: an answer `<b>bold</b> *x* [link](http://...)` was rendered bold, emphasised and
linked in the summary, so its reason misquoted the agent, and a test name with a backtick broke out of its code span.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt  # rich's Markdown parser: CommonMark with GitHub's tables

from conftest import run_tamesu

ANSWER = "<b>bold</b> & *shouted* _quiet_ [a link](http://127.0.0.1:9/x) ![img](http://127.0.0.1:9/i.png) ~~gone~~"
NAME = "pipe | and `tick` <i>"

_SUITE = f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ say: {json.dumps(ANSWER)} }} ] }}
tests:
  - {{ name: {json.dumps(NAME)}, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: nothing }} ] }}
"""


class _Cells(HTMLParser):
    """The text of each table cell, and every tag the page holds."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.tags: set[str] = set()
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "td":
            self._in = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._in is not None:
            self.cells.append(self._in)
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._in += data


def test_the_summary_shows_the_agents_words_and_the_test_name_as_text(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "markdown:summary.md"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    page = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(
        (tmp_path / "summary.md").read_text(encoding="utf-8"))
    parsed = _Cells()
    parsed.feed(page)
    assert not parsed.tags & {"b", "i", "em", "a", "img", "s", "del"}, page
    name, runs, why = parsed.cells[:3]
    assert name == f"s/{NAME}" and runs == "0/1", page
    assert why == f'contains: expected the agent to say "nothing"; not found in 1 turn(s) of agent text: "{ANSWER}"'
