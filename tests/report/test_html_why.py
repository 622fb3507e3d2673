"""The HTML report's summary row shows a failed test's one line cut at a word's end with `…`, the whole line its
tooltip (`title`), escaped. Before, the row cut the line at 160 characters in the middle of a word, with no way to
read the rest there. A real agent on 127.0.0.1 whose answer has markup and quote marks in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer

ANSWER = 'Your order <b>ORD-1</b> & "the gift" ship on Friday; ' + "the courier delivers everything to your door " * 3


def _agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": ANSWER if (await request.json()).get("message") == "long" else "ok"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


class _Whys(HTMLParser):
    """Each summary row's `why`: its text and its title, as a browser reads them (entities decoded)."""

    def __init__(self) -> None:
        super().__init__()
        self.whys: list[tuple[str, str | None]] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "span" and found.get("class") == "why":
            self.whys.append(("", found.get("title")))
            self._in = True

    def handle_endtag(self, tag: str) -> None:
        self._in = self._in and tag != "span"

    def handle_data(self, data: str) -> None:
        if self._in:
            self.whys[-1] = (self.whys[-1][0] + data, self.whys[-1][1])


def test_a_long_failure_line_is_cut_at_a_word_with_the_whole_line_as_its_tooltip(
        tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    target = {"type": "rest", "url": f"{serve(_agent()).url}/chat", "response": {"text": "$.text"}}
    suite = {"name": "s", "targets": {"bot": target}, "tests": [
        {"name": "long", "scenario": {"script": [{"say": "long"}]}, "assert": [{"contains": "refund"}]},
        {"name": "short", "scenario": {"script": [{"say": "short"}]}, "assert": [{"contains": "refund"}]},
    ]}
    (tmp_path / "s.yaml").write_text(json.dumps(suite), encoding="utf-8")
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "html,json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    run = only_run_dir(tmp_path / "out")
    lines = {t["test"]: t["failure"] for t in json.loads((run / "report.json").read_text(encoding="utf-8"))["tests"]}
    assert len(lines["long"]) > 200, lines["long"]
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<b>ORD-1</b>" not in page  # the agent's markup is text, in the row and in its title
    parser = _Whys()
    parser.feed(page)
    (long_text, long_title), (short_text, short_title) = parser.whys
    assert long_title == lines["long"]
    assert long_text.endswith("…") and len(long_text) <= 160, long_text
    kept = long_text.removesuffix("…")
    # cut where a word ends: what follows in the whole line is a space
    assert lines["long"].startswith(kept) and lines["long"][len(kept)] == " ", long_text
    assert (short_text, short_title) == (lines["short"], None)  # whole, and no tooltip to repeat it
