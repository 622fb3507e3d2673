"""How a reason names the quotes of a judge's (or an evaluator's) evidence that are not in what it was shown: in
double quotes on one line, as every other reason quotes, cut with `…` inside, three of them and how many more.
They were Python reprs cut at 60 characters: `'...'`, or `"..."` when the quote had an apostrophe, a line break
as `\\n`, no sign of the cut and none of the quotes left out. A fake agent and a fake judge, run by the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_tamesu
from report_fixtures import only_run_dir

LONG = "We refund every order within the hour, whatever was bought and wherever it was bought from"
REASON = "It greets.\n\nIt also says hello.\n" * 3  # a model's paragraphs
ONE_LINE = ("It greets. It also says hello. " * 3).strip()
QUOTES = ["It's on its way", "We refund\nwithin the hour", LONG, "Free shipping", "Call us"]
SAID = ('"It\'s on its way", "We refund within the hour", "We refund every order within the hour, whatever was '
        'bought and wherever it was…"')


def _run(tmp_path: Path, tests: str) -> tuple[dict[str, Any], str]:
    rules = [{"rubric": "greets", "pass": True, "reason": REASON, "evidence": QUOTES},
             {"check": "evaluator", "evaluator": "answer_relevancy", "score": 0.9, "reason": REASON,
              "evidence": QUOTES}]
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello there" }} ] }}
  judge: {{ provider: fake, rules: {json.dumps(rules)} }}
tests:
{tests}""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "json"], cwd=tmp_path)
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    return {t["test"]: t["runs"][0] for t in report["tests"]}, done.stdout + done.stderr


def _test(name: str, check: str) -> str:
    return f"  - {{ name: {name}, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {check} ] }}\n"


def test_quotes_not_found_are_named_in_double_quotes_on_one_line(tmp_path: Path) -> None:
    tests, said = _run(tmp_path, _test("judge", '{ judge: { rubric: "The agent greets", evidence: lenient } }')
                       + _test("evaluator", "{ evaluator: { name: answer_relevancy, evidence: lenient } }")
                       + _test("strict judge", '{ judge: "The agent greets" }')
                       + _test("strict evaluator", "evaluator: answer_relevancy"))
    lenient = tests["judge"]["assertions"][0]
    assert lenient["reason"] == f"{ONE_LINE} (fake judge) [5 quote(s) not in the transcript: {SAID} and 2 more]"
    assert lenient["unsupported_evidence"] == QUOTES  # whole, where they are kept
    assert tests["evaluator"]["assertions"][0]["reason"] == (f"answer_relevancy 0.90 (min 0.8): {ONE_LINE} (5 quote(s) "
                                                              f"not in the transcript: {SAID} and 2 more) (fake judge)")
    # strict: the judge's answer is not taken, the run is an error that names the quotes the same way
    judge_error = tests["strict judge"]["error"]
    assert judge_error == ("judge: fake:fake passed it, but none of its 5 quote(s) is in what it was shown "
                           f"({SAID} and 2 more): its verdict is not taken (evidence: lenient takes it); the judge "
                           f'said: {ONE_LINE}; its rubric: "The agent greets"')
    evaluator_error = tests["strict evaluator"]["error"]
    assert evaluator_error == ("evaluator answer_relevancy: fake:fake scored it 0.9, but none of its 5 quote(s) is "
                               f"in what it was shown ({SAID} and 2 more): its score is not taken (evidence: "
                               f"lenient takes it); it said: {ONE_LINE}")
    assert "\\n" not in said and "'It" not in said, said
