"""Run directories are named so that the newest run sorts last, even for runs started within one second; a
test's folder is named as the test is, in any script."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.report.load import latest_run_dir
from tamesu.results.rundir import new_run_dir


def test_runs_started_within_one_second_sort_in_the_order_they_started(tmp_path: Path) -> None:
    made = []
    for _ in range(5):
        run = new_run_dir(tmp_path)
        (run / "run.json").write_text("{}")
        made.append(run)
    assert sorted(made) == made
    assert latest_run_dir(tmp_path) == made[-1]
    assert latest_run_dir(tmp_path, exclude=made[-1]) == made[-2]


NAMES = {
    "返金の確認": "返金の確認",
    "返金の取消": "返金の取消",
    "हिन्दी में वापसी": "हिन्दी-में-वापसी",
    "Re\u0301servation annule\u0301e": "Réservation-annulée",  # typed on macOS: decomposed accents
    "refund / escalation (2)": "refund-escalation-2",
    "返" * 90: "返" * 66,  # 80 characters would be 240 bytes: cut at 200
}


def test_tests_named_in_any_script_get_folders_named_as_they_are(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    tests = "".join(f"  - {{ name: {json.dumps(name)}, target: bot, scenario: {{ script: [ {{ say: hi }} ] }} }}\n"
                    for name in NAMES)
    (tmp_path / "suite.tamesu.yaml").write_text(
        f'name: 予約\ntargets:\n  bot: {{ type: rest, url: "{url}/chat" }}\ntests:\n{tests}', encoding="utf-8")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = list((tmp_path / "out").iterdir())
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    folders = {line["test"]: line["runs"][0]["dir"] for line in lines}
    # before, every name without an ASCII letter was `test`, `test-2`...: no folder said which test it held
    assert folders == {name: f"予約/{folder}/run-1" for name, folder in NAMES.items()}
    for folder in folders.values():
        assert (run / folder / "result.json").is_file()
    html = (run / "report.html").read_text(encoding="utf-8")
    linked = {unquote(href) for href in re.findall(r'href="([^"#]+/result\.json)"', html)}
    assert {f"{folder}/result.json" for folder in folders.values()} <= linked
