"""A validator agent (`"type": "agent"`, a target of tamesu.yaml answering the JSONL design's validator interface)
whose answer has no verdict: the one line quotes what it said as other lines quote, in double quotes on one line,
through `tamesu test` against a local REST helper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from jsonl.test_jsonl_run import project

__all__ = ["expense_agent"]


def _helper() -> Starlette:
    async def validate(_request: Any) -> JSONResponse:
        return JSONResponse({"text": "I'd say it passed,\nmostly"})

    return Starlette(routes=[Route("/validate", validate, methods=["POST"])])


def test_a_validator_answering_no_verdict_is_quoted_on_one_line(expense_agent: ExpenseAgent, serve: Any,
                                                                tmp_path: Path) -> None:
    helper = serve(_helper())
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  judge: {{ type: rest, url: \"{helper.url}/validate\" }}\n", 1))
    cases = folder / "cases.jsonl"
    cases.write_text(json.dumps({"id": "v", "input": "I want to submit an expense", "assertions": [
        {"type": "agent", "use": "agents:judge", "options": {"metadata": {"criteria": "asks the type"}}}]}) + "\n")
    done = run_test(["-i", str(cases), "-n", "expense", "-o", str(tmp_path / "records.jsonl")], cwd=folder)
    said = done.stdout + done.stderr
    # before: in 'I\'d say it passed,\nmostly' (a Python repr: its quotes, a backslash before the apostrophe, `\n`)
    assert 'validator judge: no usable answer (passed, score, reason, suggestions) in "I\'d say it passed, mostly"' \
        in said, said
