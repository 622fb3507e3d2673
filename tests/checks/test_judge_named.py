"""A failed judge names its rubric in its reason: a test with two judges showed two failures named `judge` whose
reasons (the model's own words) named neither rubric, in the console, JUnit, HTML, Markdown and JSON alike. Two
judges of one test are also named by where each is written (`assert[1]/judge`), a name that keys baselines and the
store's history across runs as the place does. A judge model served on 127.0.0.1."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import run_tamesu
from model_servers import OpenAIServer, text
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer

LONG = "The agent apologises for the delay, offers a refund and says when the money arrives on the card"
SHORT = "The agent asks for the order number"


def _verdict(passed: bool, reason: str) -> Any:
    return text(json.dumps({"pass": passed, "score": 1 if passed else 0, "reason": reason, "evidence": []}))


def test_two_failed_judges_are_told_apart_by_their_rubrics(tmp_path: Path,
                                                           serve: Callable[[Any], ThreadServer]) -> None:
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    # the model's reason, as a terse model writes it, the same for both; then a passing one
    judge.plan(_verdict(False, "it did not do that"), _verdict(False, "it did not do that"),
               _verdict(True, "it greets"))
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
  judge: {{ provider: openai, model: judge-model, base_url: "{url}", timeout: 5s }}
tests:
  - name: judged
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ judge: "{LONG}" }}, {{ judge: "{SHORT}" }}, {{ judge: "The agent greets" }} ]
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--no-cache", "--report", "junit,html,json,markdown"],
                      cwd=tmp_path, env={"OPENAI_API_KEY": "sk-local-0123456789"})
    assert done.returncode == 1, done.stdout + done.stderr
    first = 'assert[0]/judge: rubric "The agent apologises for the delay, offers a refund and…": it did not do that'
    second = 'assert[1]/judge: rubric "The agent asks for the order number": it did not do that'
    assert f"✗ {first}" in done.stdout and f"✗ {second}" in done.stdout, done.stdout
    run = only_run_dir(tmp_path / "out")

    report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    [test] = report["tests"]
    assert test["failure"] == f"{first} (and 1 more check failed)"
    graded = test["runs"][0]["assertions"]
    # named by their place; the reasons say which rubric; the passing judge's reason is the model's
    assert [a["name"] for a in graded] == ["assert[0]/judge", "assert[1]/judge", "assert[2]/judge"]
    assert [f"{a['name']}: {a['reason']}" for a in graded] == [first, second, "assert[2]/judge: it greets"]

    [case] = ET.parse(run / "junit.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == test["failure"]
    assert first in (failure.text or "") and second in (failure.text or ""), failure.text
    page = (run / "report.html").read_text(encoding="utf-8")
    assert 'rubric &quot;The agent asks for the order number&quot;: it did not do that' in page
    assert first.replace('"', "&quot;") in page
    # Markdown escapes the brackets of the name
    assert first.replace("[", "\\[").replace("]", "\\]") in (run / "summary.md").read_text(encoding="utf-8")


def test_a_judge_that_could_not_decide_names_its_rubric(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    # two judges whose model answered nothing in shape read `judge: no verdict that fits the schema ...` both
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    judge.plan(*[text("I would rather not say")] * 6)
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
  judge: {{ provider: openai, model: judge-model, base_url: "{url}", timeout: 5s }}
tests:
  - name: judged
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ judge: "The agent greets" }}, {{ judge: "{SHORT}" }} ]
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--no-cache", "--report", "json"], cwd=tmp_path,
                      env={"OPENAI_API_KEY": "sk-local-0123456789"})
    assert done.returncode == 3, done.stdout + done.stderr
    said = 'no verdict that fits the schema after 3 attempts'
    line = f'! assert[0]/judge: {said} (each answer: no JSON object in the answer); its rubric: "The agent greets"'
    assert line in done.stdout, done.stdout
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    reasons = [a["reason"] for a in report["tests"][0]["runs"][0]["assertions"]]
    assert reasons == [f'not decided: judge: {said} (each answer: no JSON object in the answer); its rubric: "{rubric}"'
                       for rubric in ("The agent greets", SHORT)], reasons
