"""Generator agents (`-i agents:NAME?count=N`, a target of tamesu.yaml) answering as the design has them: the
structured output `{"cases": [...]}`, or the JSON array its example generator prompt asks for, through
`tamesu test --dry-run -o` against a local REST generator agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from jsonl.test_jsonl_run import project
from net.test_secret_forms import SECRET, leaks

__all__ = ["expense_agent"]


def _generator(shape: str) -> Starlette:
    async def generate(request: Request) -> JSONResponse:
        count = (await request.json())["options"]["metadata"]["count"]
        cases = [{"id": f"g{n}", "input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}]}
                 for n in range(count)]
        if shape == "array":  # the whole answer is the array ("Output as JSON array of test cases")
            return JSONResponse(cases)
        if shape == "array-in-text":  # a model's words around it, as a prompt on a model answers
            return JSONResponse({"text": f"Here are the cases:\n```json\n{json.dumps(cases)}\n```"})
        return JSONResponse({"text": "nothing to offer"})

    return Starlette(routes=[Route("/generate", generate, methods=["POST"])])


@pytest.mark.parametrize("shape", ["array", "array-in-text"])
def test_a_generator_agent_may_answer_a_json_array_of_cases(expense_agent: ExpenseAgent, serve: Any,
                                                            tmp_path: Path, shape: str) -> None:
    helper = serve(_generator(shape))
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  gen: {{ type: rest, url: \"{helper.url}/generate\" }}\n", 1))
    out = tmp_path / "made.jsonl"
    done = run_test(["-i", "agents:gen?count=2", "-n", "expense", "--dry-run", "-o", str(out)], cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["g0", "g1"]


def test_a_generator_agent_answering_no_cases_is_one_line(expense_agent: ExpenseAgent, serve: Any,
                                                         tmp_path: Path) -> None:
    helper = serve(_generator("words"))
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  gen: {{ type: rest, url: \"{helper.url}/generate\" }}\n", 1))
    done = run_test(["-i", "agents:gen?count=2", "-n", "expense", "--dry-run"], cwd=folder)
    assert (done.returncode, done.stderr.strip()) == (3, "tamesu test: generator gen: no test cases "
                                                         "({\"cases\": [...]} or a JSON array of them) in "
                                                         '"nothing to offer"'), done.stdout


@pytest.mark.parametrize(("body", "said"), [
    ("raise RuntimeError('no fixtures folder')", "generator tests.made raised RuntimeError: no fixtures folder"),
    ("return []", "generator tests.made returned no test cases"),
    ("return {'cases': 'none'}", "generator tests.made returned dict; expected a list of test cases, "
                                 "{\"cases\": [...]} or JSONL text"),
    ("return 'not json'", "generator tests.made returned JSONL whose line 1 is not JSON: Expecting value "
                          "(column 1)"),
])
def test_a_generator_script_that_fails_is_the_suites_problem(expense_agent: ExpenseAgent, tmp_path: Path,
                                                            body: str, said: str) -> None:
    """The project's own script, as a script assertion or simulator is: its authors fix it (exit 2), where it was
    the environment's (exit 3), and an empty list was said to be no list."""
    folder = project(tmp_path, expense_agent.url)
    (folder / "scripts" / "tests").mkdir(parents=True)
    (folder / "scripts" / "tests" / "made.py").write_text(f"def generate(inputs):\n    {body}\n")
    done = run_test(["-i", "scripts:tests.made", "-n", "expense", "--dry-run"], cwd=folder)
    assert (done.returncode, done.stderr.strip()) == (2, f"tamesu test: {said}"), done.stdout


def test_a_secret_a_generated_case_holds_is_written_as_its_reference_never_its_value(
        expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # before: `--dry-run -o` wrote what the generator returned as it was: a secret it had read (a token for the
    # agent) in the clear, in the file a user keeps and commits
    folder = project(tmp_path, expense_agent.url)
    (folder / "scripts" / "tests").mkdir(parents=True)
    (folder / "scripts" / "tests" / "made.py").write_text(
        "import base64, os\nfrom urllib.parse import quote\n"
        "def generate(inputs):\n"
        "    token = os.environ['SHOP_TOKEN']\n"
        "    return [{'id': 'g', 'name': 'as ' + token, 'input': 'my token is ' + token,\n"
        "             'options': {'metadata': {'b64': base64.b64encode(token.encode()).decode(),\n"
        "                                      'url': quote(token, safe='')}},\n"
        "             'assertions': [{'type': 'contains', 'value': '{{ secrets.SHOP_TOKEN }}'}]}]\n")
    out = tmp_path / "made.jsonl"
    done = run_test(["-i", "scripts:tests.made", "-n", "expense", "--dry-run", "-o", str(out)], cwd=folder,
                    env={"SHOP_TOKEN": SECRET})
    assert done.returncode == 0, done.stdout + done.stderr
    written = out.read_text(encoding="utf-8")
    assert leaks(written) == [] and leaks(done.stdout + done.stderr) == [], written + done.stdout
    [case] = [json.loads(line) for line in written.splitlines()]
    # the value as it was is its reference, which renders it again when the file is run; an encoded form masked
    assert case["input"] == "my token is {{ secrets.SHOP_TOKEN }}" and case["name"] == "as {{ secrets.SHOP_TOKEN }}"
    assert case["options"]["metadata"] == {"b64": "***", "url": "***"}, case
