"""What a failed check quotes of a value it compared (a `json_path`'s, a capture's, an `equals`'s, a golden file's
line): JSON text cut inside, so that it still reads as what it was. Before, the value's JSON text was cut at 120
characters: the closing quote or brace lost, an object's keys after its first long value gone, and two long
strings that differ near their end cut alike, the difference the reason was about out of sight. A real agent on
127.0.0.1 answers with a JSON body."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer

ORDER = {"id": 1, "items": [{"sku": f"SKU-{i}", "name": "a very long product name " * 2, "qty": i} for i in range(8)],
         "status": "shipped"}
SAID = "Your order is below. " + "It ships on Friday and our courier delivers it to your door. " * 3


def _agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        return JSONResponse({"text": SAID + f"Goodbye, {message}.", "order": ORDER, "note": "word " * 60})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _failures(tmp_path: Path, serve: Callable[[Any], ThreadServer], tests: list[dict[str, Any]]) -> dict[str, str]:
    """Each test's `failure` line in report.json, after a real run."""
    target = {"type": "rest", "url": f"{serve(_agent()).url}/chat", "response": {"text": "$.text"}}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": tests}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    return {t["test"].removeprefix("s/"): t["failure"] for t in report["tests"]}


def _hi(**more: Any) -> dict[str, Any]:
    return {"scenario": {"script": [{"say": "Ann"}]}, **more}


ORDER_SHOWN = ('{"id": 1, "items": [{"sku": "SKU-0", "name": "a very long product name a very…", "qty": 0}, …], '
               '"status": "shipped"}')


def test_a_json_value_is_cut_inside_its_quotes_and_brackets(tmp_path: Path,
                                                            serve: Callable[[Any], ThreadServer]) -> None:
    failures = _failures(tmp_path, serve, [
        {"name": "object", **_hi(), "assert": [{"json_path": {"path": "$.order", "equals": {"id": 2}}}]},
        {"name": "string", **_hi(), "assert": [{"json_path": {"path": "$.note", "equals": "words"}}]},
        {"name": "captured", **_hi(capture=[{"name": "note", "json_path": "$.note"}]),
         "assert": [{"captured": {"name": "note", "equals": "x"}}]},
        {"name": "captured object", **_hi(capture=[{"name": "order", "json_path": "$.order"}]),
         "assert": [{"captured": {"name": "order", "exists": False}}]},
        {"name": "array", **_hi(), "assert": [{"equals": {"path": "$.order.items", "value": []}}]},
    ])
    # every key of the object is there, its long value cut within; the string keeps its closing quote
    assert failures["object"] == f'json_path: $.order in turn 1: expected {{"id": 2}}, found {ORDER_SHOWN}'
    assert failures["string"] == ('json_path: $.note in turn 1: expected "words", found "' + "word " * 22
                                  + 'word…"')
    assert failures["captured"] == 'captured: captured note: expected "x", found "' + "word " * 22 + 'word…"'
    assert failures["captured object"] == f"captured: expected nothing captured as order, found {ORDER_SHOWN}"
    assert failures["array"] == ('equals: $.order.items is [{"sku": "SKU-0", "name": "a very long product name a '
                                 'very long product name ", "qty": 0}, {"sku": "SKU-1", …}, …] in turn 1, '
                                 'expected []')


def test_two_long_strings_are_quoted_from_where_they_differ(tmp_path: Path,
                                                            serve: Callable[[Any], ThreadServer]) -> None:
    expected = SAID + "Goodbye, Bob."
    (tmp_path / "g.txt").write_text(f"user: Ann\nagent: {expected}\n")
    failures = _failures(tmp_path, serve, [
        {"name": "json_path", **_hi(), "assert": [{"json_path": {"path": "$.text", "equals": expected}}]},
        {"name": "equals", **_hi(), "assert": [{"equals": expected}]},
        {"name": "golden", **_hi(), "assert": [{"golden": "g.txt"}]},
    ])
    wanted, found = '"…delivers it to your door. Goodbye, Bob."', '"…delivers it to your door. Goodbye, Ann."'
    assert failures["json_path"] == f"json_path: $.text in turn 1: expected {wanted}, found {found}"
    assert failures["equals"] == f"equals: expected exactly {wanted}, turn 1 said {found}"
    assert failures["golden"] == (f"golden: the transcript differs from golden file g.txt at line 2: expected "
                                  f"{wanted}, found {found}")
