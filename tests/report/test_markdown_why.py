"""The Markdown summary's `why` cell is the one line the other reports show (report.json's `failure`, JUnit's
message), escaped for a table cell: before, it was cut at 300 characters (a baseline's regression at 200) where
every other report showed the line whole. Only a line longer than GitHub's job summary can hold 50 of (a pack
whose every part failed) is cut, and the cell says so. A real agent on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt  # rich's Markdown parser: CommonMark with GitHub's tables
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer


def _agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        return JSONResponse({"text": f"About {message}: a | b\nc, " + "and then some more words " * 5})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


class _Cells(HTMLParser):
    """The text of each table cell."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "td":
            self._in = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._in is not None:
            self.cells.append(self._in)
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._in += data


def test_the_why_cell_is_the_whole_line_the_other_reports_show(tmp_path: Path,
                                                               serve: Callable[[Any], ThreadServer]) -> None:
    server = serve(_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}
    script = {"script": [{"say": "one"}, {"say": "two"}]}
    pack = {"description": "every part fails", "assert": [{"contains": f"refund {i}"} for i in range(8)]}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "packs": {"many": pack},
                                                 "tests": [
        {"name": "long", "scenario": script, "assert": [{"contains": "refund"}]},
        {"name": "huge", "scenario": script, "assert": [{"pack": "many"}]},
    ]}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json,markdown"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    run = only_run_dir(tmp_path / "out")
    failures = {t["test"]: t["failure"] for t in json.loads((run / "report.json").read_text())["tests"]}
    parsed = _Cells()
    parsed.feed(MarkdownIt("commonmark").enable(["table"]).render((run / "summary.md").read_text()))
    rows = {parsed.cells[i]: parsed.cells[i + 2] for i in range(0, len(parsed.cells), 3)}

    long = failures["long"]
    assert 300 < len(long) < 2000 and '"About one: a | b c, and then' in long, long
    assert rows["s/long"] == long  # whole, its pipe a pipe, in one row

    huge = failures["huge"]
    assert len(huge) > 2000 and huge.startswith("pack many: 8 of 8 failed: contains: "), huge[:100]
    shown, said = rows["s/huge"].split("… (cut at 2000 of ")
    assert said == f"{len(huge)} characters: report.json has the whole line)", said
    # cut at a word's end as every line is cut (it was cut mid-word at 1999 characters)
    assert 1900 < len(shown) < 2000 and huge.startswith(shown) and huge[len(shown)] == " ", shown[-40:]
