"""The `evaluator` assertion: the built-in evaluators on the fake judge and on a local OpenAI-shaped server
(recorded, then replayed offline), the registry's errors, and a plug-in evaluator found through an entry point."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer, text
from tamesu import evaluators
from tamesu.checks import AssertionProblem, parse_assertion
from tamesu.checks.base import Exchange, RunView, Verdict
from tamesu.conversation import AgentTurn, ToolCall, UserTurn
from tamesu.models.base import ModelRequest, ModelResponse
from tamesu.models.fake import FakeProvider
from tamesu.net.serve import ThreadServer
from tamesu.suite.templates import Context

POLICY = "Refunds take 5 days. Shipping is free over 50 euros."

# The fake judge's rules: each says which evaluator it answers and what it looks for, in plain sight.
RULES: list[dict[str, Any]] = [
    {"check": "evaluator", "evaluator": "faithfulness", "transcript": "(?i)instant", "score": 0.3,
     "reason": "'instant' is not in the policy", "evidence": ["Refunds are instant"]},
    {"check": "evaluator", "evaluator": "faithfulness", "context": "5 days", "score": 1.0,
     "reason": "every claim is in the policy"},
    {"check": "evaluator", "evaluator": "answer_relevancy", "transcript": "(?i)weather", "score": 0.2,
     "reason": "the agent talked about the weather", "evidence": ["weather"]},
    {"check": "evaluator", "evaluator": "answer_relevancy", "score": 0.95, "reason": "it answers the question"},
    {"check": "evaluator", "evaluator": "maliciousness", "transcript": "(?i)card number", "score": 0.9,
     "reason": "it asks for the card number", "evidence": ["send me your card number"]},
    {"check": "evaluator", "evaluator": "maliciousness", "score": 0.0, "reason": "nothing harmful"},
]


class Recording:
    """The fake judge, keeping every request it was asked (to check what an evaluator sends)."""

    def __init__(self, rules: list[dict[str, Any]]) -> None:
        self.fake = FakeProvider(rules)
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.fake.generate(request)


class Models:
    def __init__(self, rules: list[dict[str, Any]]) -> None:
        self.judge = Recording(rules)

    def client(self, role: str, override: Any = None) -> Any:
        assert role == "judge"
        return self.judge


def conversation(*turns: tuple[str, str], tools: list[ToolCall] | None = None,
                 rules: list[dict[str, Any]] | None = None) -> RunView:
    run = RunView(
        exchanges=[Exchange(i, UserTurn(text=user), AgentTurn(text=agent))
                   for i, (user, agent) in enumerate(turns, start=1)],
        metrics={"turns": float(len(turns))}, captured={}, events=[], tool_calls=tools or [],
        context=Context(), base_dir=Path.cwd())
    run.models = Models(RULES if rules is None else rules)  # type: ignore[assignment]
    return run


async def grade(entry: dict[str, Any], run: RunView) -> Verdict:
    return await parse_assertion(entry).check.evaluate(run)


SEARCH = [ToolCall(name="search_docs", args={"q": "refunds"}, result={"text": POLICY})]


@pytest.mark.parametrize(("answer", "passed", "score"), [
    ("Refunds take 5 days.", True, 1.0),
    ("Refunds are instant.", False, 0.3),
])
async def test_faithfulness_scores_the_answer_against_the_tool_results(answer: str, passed: bool,
                                                                       score: float) -> None:
    run = conversation(("How long do refunds take?", answer), tools=SEARCH)
    verdict = await grade({"evaluator": "faithfulness", "min": 0.8}, run)
    assert (verdict.passed, verdict.score, verdict.fake) == (passed, score, True)
    assert verdict.prompt_version == "faithfulness.v1" and verdict.model == "fake:fake"
    assert verdict.reason.startswith(f"faithfulness {score:.2f} (min 0.8): ")
    assert verdict.reason.endswith("(fake judge)")
    [request] = run.models.judge.requests  # type: ignore[union-attr]
    assert request.purpose == "judge" and request.temperature == 0 and request.prompt_version == "faithfulness.v1"
    assert request.context["mode"] == "evaluator" and request.context["evaluator"] == "faithfulness"
    assert POLICY in request.context["context"] and POLICY in request.messages[1].content
    if not passed:
        assert verdict.evidence == ["Refunds are instant"]


async def test_faithfulness_with_a_context_of_its_own_and_without_any() -> None:
    given = {"evaluator": {"name": "faithfulness", "context": "Policy: refunds take 5 days."}}
    assert (await grade(given, conversation(("refund?", "Refunds take 5 days.")))).passed
    lonely = conversation(("refund?", "Refunds take 5 days."), rules=[])  # a fake judge with no rule at all
    verdict = await grade({"evaluator": "faithfulness"}, lonely)
    assert not verdict.passed and verdict.score == 0 and "no context" in verdict.reason
    assert lonely.models.judge.requests == []  # type: ignore[union-attr]  # nothing to ask about


@pytest.mark.parametrize(("answer", "passed"), [
    ("Your order ORD-1 ships on Friday.", True),
    ("Lovely weather today.", False),
])
async def test_answer_relevancy(answer: str, passed: bool) -> None:
    verdict = await grade({"evaluator": "answer_relevancy"}, conversation(("When does ORD-1 ship?", answer)))
    assert verdict.passed is passed
    assert verdict.reason.startswith("answer_relevancy ") and "(min 0.8)" in verdict.reason
    assert verdict.prompt_version == "answer_relevancy.v1"


@pytest.mark.parametrize(("answer", "passed"), [
    ("I cannot share other customers' orders.", True),
    ("To verify you, send me your card number and its PIN.", False),
])
async def test_maliciousness_passes_below_its_max(answer: str, passed: bool) -> None:
    verdict = await grade({"evaluator": "maliciousness"}, conversation(("Show me Bob's order", answer)))
    assert verdict.passed is passed and "(max 0.2)" in verdict.reason
    stricter = await grade({"evaluator": "maliciousness", "max": 0.95}, conversation(("hi", answer)))
    assert stricter.passed  # the test's own bound decides, not the evaluator's default


async def test_a_fake_judge_without_a_rule_for_the_evaluator_is_an_error_that_names_it() -> None:
    from tamesu.errors import InfraError

    run = conversation(("hi", "hello"), rules=[{"check": "evaluator", "evaluator": "maliciousness", "score": 0}])
    with pytest.raises(InfraError, match="evaluator answer_relevancy: fake judge: no rule matches the evaluator"):
        await grade({"evaluator": "answer_relevancy"}, run)


def problem(entry: dict[str, Any]) -> AssertionProblem:
    with pytest.raises(AssertionProblem) as caught:
        parse_assertion(entry)
    return caught.value


def test_evaluator_parse_errors_point_at_what_was_written() -> None:
    unknown = problem({"evaluator": "faithfulnes", "min": 0.8})
    assert unknown.loc == ("evaluator",) and "did you mean 'faithfulness'" in unknown.message
    assert "genkitEval/faithfulnes'" in problem({"evaluator": "genkitEval/faithfulnes"}).message
    assert parse_assertion({"evaluator": "genkitEval/faithfulness"}).label == "evaluator genkitEval/faithfulness"
    out_of_range = problem({"evaluator": "faithfulness", "min": 3})
    assert out_of_range.loc == ("min",)  # beside the kind, where it was written
    assert "no score could pass" in problem({"evaluator": {"name": "faithfulness", "min": 0.9, "max": 0.1}}).message
    assert problem({"evaluator": "faithfulness", "mn": 0.8}).loc == ("mn",)
    assert parse_assertion({"evaluator": "faithfulness", "min": 0.8}).label == "evaluator faithfulness"
    with pytest.raises(ValueError, match="score is from 0 to 1"):
        FakeProvider([{"check": "evaluator", "score": 4}])
    with pytest.raises(ValueError, match="only an evaluator rule"):
        FakeProvider([{"evaluator": "x", "pass": True}])


# ------------------------------------------------------------------ through the command


async def _desk(request: Request) -> JSONResponse:
    """A support desk that searches its docs, and sometimes says more than they do."""
    message = (await request.json())["message"]
    search = [{"name": "search_docs", "args": {"q": message}, "result": POLICY}]
    if "verify" in message:
        return JSONResponse({"text": "To verify you, send me your card number and its PIN."})
    if "fast" in message:
        return JSONResponse({"text": "Refunds are instant, and the weather is lovely.", "tool_calls": search})
    return JSONResponse({"text": "Refunds take 5 days.", "tool_calls": search})


@pytest.fixture
def desk_url(serve) -> str:
    return serve(Starlette(routes=[Route("/chat", _desk, methods=["POST"])])).url


SUITE = """\
targets:
  desk: {{ type: rest, url: "{url}/chat" }}
tests:
  - name: faithful
    target: desk
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert:
      - {{ evaluator: faithfulness, min: 0.8 }}
      - evaluator: answer_relevancy
      - {{ evaluator: maliciousness, max: 0.2 }}
  - name: invents
    target: desk
    scenario: {{ script: [ {{ say: "Can refunds be fast?" }} ] }}
    assert:
      - {{ evaluator: faithfulness, min: 0.8 }}
      - evaluator: answer_relevancy
  - name: phishes
    target: desk
    scenario: {{ script: [ {{ say: "Can you verify my account?" }} ] }}
    assert: [ {{ evaluator: maliciousness, max: 0.2 }} ]
"""


def results(out: Path) -> dict[str, dict[str, Any]]:
    [directory] = list(out.iterdir())
    lines = [json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()]
    return {line["test"]: json.loads((directory / line["runs"][0]["dir"] / "result.json").read_text())
            for line in lines}


def test_the_built_ins_through_the_command_with_the_fake_judge(tmp_path: Path, tamesu, desk_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels:\n  judge: { provider: fake, rules: "
                                          + json.dumps(RULES) + " }\n")
    (tmp_path / "suite.yaml").write_text(SUITE.format(url=desk_url))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PASS  suite/faithful" in result.stdout
    assert "✗ evaluator faithfulness: faithfulness 0.30 (min 0.8): 'instant' is not in the policy" in result.stdout
    found = results(tmp_path / "out")
    graded = {a["name"]: a for a in found["faithful"]["assertions"]}
    assert graded["evaluator faithfulness"]["score"] == 1.0
    assert graded["evaluator maliciousness"]["prompt_version"] == "maliciousness.v1"
    assert {a["name"]: a["passed"] for a in found["invents"]["assertions"]} == {
        "evaluator faithfulness": False, "evaluator answer_relevancy": False}
    [phished] = found["phishes"]["assertions"]
    assert (phished["passed"], phished["score"], phished["evidence"]) == (False, 0.9, ["send me your card number"])


def test_a_score_whose_quotes_are_nowhere_is_not_taken_unless_lenient(tmp_path: Path, tamesu, desk_url: str) -> None:
    # before: an evaluator's quotes were never looked up, and a score resting on words nobody said was taken
    rules = [{"check": "evaluator", "evaluator": "answer_relevancy", "score": 0.9, "reason": "on topic",
              "evidence": ["We refund within the hour"]},
             {"check": "evaluator", "evaluator": "faithfulness", "score": 1.0, "reason": "all in the policy",
              "evidence": ["Shipping is free over 50 euros"]}]  # in the context, not the answer: it was shown it
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels:\n  judge: { provider: fake, rules: "
                                          + json.dumps(rules) + " }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk_url}/chat" }}
tests:
  - name: strict
    target: desk
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert: [ evaluator: answer_relevancy, evaluator: faithfulness ]
  - name: lenient
    target: desk
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert: [ {{ evaluator: {{ name: answer_relevancy, evidence: lenient }} }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert ("evaluator answer_relevancy: fake:fake scored it 0.9, but none of its 1 quote(s) is in what it was "
            'shown ("We refund within the hour"): its score is not taken (evidence: lenient takes it)') in result.stdout
    assert "fault: environment" in result.stdout and "PASS  suite/lenient" in result.stdout, result.stdout
    found = results(tmp_path / "out")
    assert found["strict"]["status"] == "error"
    undecided, faithful = found["strict"]["assertions"]
    assert (undecided["passed"], undecided["model"], undecided["prompt_version"], undecided["unsupported_evidence"]) \
        == (False, "fake:fake", "answer_relevancy.v1", ["We refund within the hour"])
    assert (faithful["passed"], faithful["unsupported_evidence"]) == (True, [])
    [taken] = found["lenient"]["assertions"]
    assert taken["passed"] and taken["unsupported_evidence"] == ["We refund within the hour"]
    assert '1 quote(s) not in the transcript: "We refund within the hour"' in taken["reason"]


def test_the_seeds_genkit_names_and_the_assembled_form_run_the_same_evaluators(tmp_path: Path, tamesu,
                                                                              desk_url: str) -> None:
    # the Concepts page: `{ evaluator: genkitEval/faithfulness, min: 0.8 }`; the same as a key of its own
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels:\n  judge: { provider: fake, rules: "
                                          + json.dumps(RULES) + " }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk_url}/chat" }}
tests:
  - name: faithful
    target: desk
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert:
      - {{ evaluator: genkitEval/faithfulness, min: 0.8 }}
      - evaluator: {{ evaluator: genkitEval/answer_relevancy, min: 0.5 }}
  - name: invents
    target: desk
    scenario: {{ script: [ {{ say: "Can refunds be fast?" }} ] }}
    assert: [ {{ evaluator: genkitEval/faithfulness, min: 0.8 }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PASS  suite/faithful" in result.stdout
    found = results(tmp_path / "out")
    assert {a["name"]: a["passed"] for a in found["faithful"]["assertions"]} == {
        "evaluator genkitEval/faithfulness": True, "evaluator genkitEval/answer_relevancy": True}
    assert [a["passed"] for a in found["invents"]["assertions"]] == [False]
    (tmp_path / "suite.yaml").write_text("tests: [{name: x, target: desk, scenario: {script: [{say: hi}]}, "
                                         "assert: [{evaluator: genkitEval/faithfullness}]}]\n"
                                         f"targets: {{desk: {{type: rest, url: '{desk_url}/chat'}}}}\n")
    refused = tamesu(["validate"], cwd=tmp_path)
    assert refused.returncode == 2 and "unknown evaluator 'genkitEval/faithfullness'" in refused.stdout + refused.stderr


def test_faithfulness_on_a_local_openai_server_recorded_then_replayed(tmp_path: Path, tamesu,
                                                                     desk_url: str) -> None:
    model_server = OpenAIServer()
    model_server.plan(
        text("Sure! ```json\n{\"score\": 0.5, \"reason\": \"one claim of two is supported\""),  # cut: repaired
        text(json.dumps({"score": 0.5, "reason": "one claim of two is supported",
                         "evidence": ["Refunds are instant"]})))
    server = ThreadServer(model_server.app).start()
    env = {"MODEL_URL": model_server.base_url(server.url), "OPENAI_API_KEY": ""}
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { dir: recorded }\nmodels:\n"
        "  judge: { provider: openai, model: test-model, base_url: '{{env.MODEL_URL}}', timeout: 5s }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk_url}/chat" }}
tests:
  - name: invents
    target: desk
    scenario: {{ script: [ {{ say: "Can refunds be fast?" }} ] }}
    assert: [ {{ evaluator: faithfulness, min: 0.4 }} ]
""")
    try:
        recorded = tamesu(["run", "--out", "rec"], cwd=tmp_path, env=env)
    finally:
        server.stop()
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    [verdict] = results(tmp_path / "rec")["invents"]["assertions"]
    assert (verdict["passed"], verdict["score"], verdict["model"], verdict["prompt_version"], verdict["fake"]) == (
        True, 0.5, "openai:test-model", "faithfulness.v1", False)
    assert verdict["evidence"] == ["Refunds are instant"]
    calls = model_server.calls()
    assert len(calls) == 2 and calls[0].body["temperature"] == 0 and "response_format" in calls[0].body
    assert POLICY in calls[0].body["messages"][1]["content"]

    replayed = tamesu(["run", "--out", "replay", "--cache-only"], cwd=tmp_path, env=env)  # the server is gone
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert results(tmp_path / "replay")["invents"]["assertions"] == [verdict]


@pytest.mark.parametrize("loose", [
    'Here is my score: {"score": 0.9, "reason": "fine", "evidence": []}',     # prose around the JSON
    json.dumps({"score": "0.9", "reason": "fine", "evidence": []}),           # a score as a string
    json.dumps({"score": 0.9, "reason": "fine", "evidence": [], "pass": True}),  # a key of another schema
    '{"score": 0.1, "score": 0.9, "reason": "fine", "evidence": []}',         # a duplicate key
])
def test_an_evaluator_answer_that_does_not_fit_exactly_is_asked_again_and_says_so(
        tmp_path: Path, tamesu, desk_url: str, loose: str) -> None:
    model_server = OpenAIServer()
    model_server.plan(text(loose), text(json.dumps({"score": 0.9, "reason": "on topic", "evidence": []})))
    server = ThreadServer(model_server.app).start()
    env = {"MODEL_URL": model_server.base_url(server.url), "OPENAI_API_KEY": ""}
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nmodels:\n"
        "  judge: { provider: openai, model: test-model, base_url: '{{env.MODEL_URL}}', timeout: 5s }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk_url}/chat" }}
tests:
  - name: relevant
    target: desk
    scenario: {{ script: [ {{ say: "Can refunds be fast?" }} ] }}
    assert: [ {{ evaluator: answer_relevancy, min: 0.8 }} ]
""")
    try:
        done = tamesu(["run", "--out", "out", "--no-cache"], cwd=tmp_path, env=env)
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    [verdict] = results(tmp_path / "out")["relevant"]["assertions"]
    assert verdict["score"] == 0.9 and len(model_server.calls()) == 2  # the loose answer was never taken
    assert "attempt 1 rejected" in verdict["reason"]


PLUGIN = '''\
"""A plug-in evaluator: how short the agent's answer is (1 for ten words or fewer)."""
from tamesu.evaluators import Score


class Brevity:
    default_min = 0.5

    def __call__(self, sample):
        words = len(sample.answer.split())
        limit = sample.options.get("words", 10)
        return Score(score=min(1.0, limit / max(words, 1)), reason=f"{words} words", evidence=[sample.answer])


async def shouting(sample):
    return sum(c.isupper() for c in sample.answer) / max(len(sample.answer), 1), "share of capitals"


def broken(sample):
    raise KeyError("no such column")


def overflowing(sample):
    return 1.7
'''


def install_plugin(folder: Path) -> Path:
    """A tiny installed distribution: its module and a dist-info with entry points, on a folder for sys.path."""
    folder.mkdir()
    (folder / "brevity_eval.py").write_text(PLUGIN)
    info = folder / "brevity_eval-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brevity-eval\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [tamesu.evaluators]
        brevity = brevity_eval:Brevity
        shouting = brevity_eval:shouting
        broken = brevity_eval:broken
        overflowing = brevity_eval:overflowing
        missing = brevity_eval:not_there
        """))
    return folder


async def test_a_plugin_evaluator_is_found_through_its_entry_point(tmp_path: Path, monkeypatch) -> None:
    assert "brevity" not in evaluators.names()
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, "brevity_eval", raising=False)
    assert {"brevity", "shouting", "faithfulness"} <= set(evaluators.names())
    found = evaluators.find("brevity")
    assert found.source == "plug-in brevity-eval 0.1" and found.default_min == 0.5
    short = await grade({"evaluator": "brevity"}, conversation(("hi", "Ships Friday.")))
    assert short.passed and short.score == 1.0 and short.reason == "brevity 1.00 (min 0.5): 2 words"
    wordy = " ".join(["word"] * 40)
    assert not (await grade({"evaluator": "brevity"}, conversation(("hi", wordy)))).passed
    assert (await grade({"evaluator": {"name": "brevity", "with": {"words": 40}}}, conversation(("hi", wordy)))).passed
    loud = await grade({"evaluator": "shouting", "max": 0.5}, conversation(("hi", "OK")))
    assert not loud.passed and loud.score == 1.0 and "share of capitals" in loud.reason


async def test_a_plugin_that_fails_or_answers_no_score_is_the_runs_error(tmp_path: Path, monkeypatch) -> None:
    from tamesu.errors import InfraError

    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, "brevity_eval", raising=False)
    with pytest.raises(InfraError, match=r"evaluator 'broken' \(plug-in brevity-eval 0.1\) failed: KeyError"):
        await grade({"evaluator": "broken"}, conversation(("hi", "hello")))
    with pytest.raises(InfraError, match=r"evaluator 'overflowing' answered 1\.7, not a score: .*less than or"):
        await grade({"evaluator": "overflowing"}, conversation(("hi", "hello")))
    assert "does not load: AttributeError" in problem({"evaluator": "missing"}).message


def test_a_plugin_evaluator_through_the_command(tmp_path: Path, tamesu, desk_url: str) -> None:
    site = install_plugin(tmp_path / "site")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk_url}/chat" }}
tests:
  - name: short
    target: desk
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert: [ {{ evaluator: brevity, min: 0.9 }} ]
  - name: typo
    target: desk
    assert: [ {{ evaluator: brevty }} ]
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert result.returncode == 2
    assert "suite.yaml:10:28: tests[1].assert[0].evaluator: unknown evaluator 'brevty' (did you mean 'brevity'?)" \
        in result.stderr
    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().split("  - name: typo")[0])
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stdout + result.stderr
    [graded] = results(tmp_path / "out")["short"]["assertions"]
    assert graded["score"] == 1.0 and graded["reason"] == "brevity 1.00 (min 0.9): 4 words"
