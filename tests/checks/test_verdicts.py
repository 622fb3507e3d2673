"""Verdicts are exactly what the judge said, or say what was done to them: every malformed shape a judge
endpoint can answer, tried against local OpenAI- and Anthropic-shaped servers through the real providers,
the resilient client and the judge role; evidence looked up in the transcript."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from model_servers import AnthropicServer, OpenAIServer, raw, reasoned, status, text
from sdk_groups import IN_PROCESS_SDKS
from tamesu.checks import parse_assertion
from tamesu.checks.base import RunView
from tamesu.conversation import AgentTurn, Exchange, UserTurn
from tamesu.errors import InfraError
from tamesu.models.client import ModelRegistry
from tamesu.models.spec import ModelSpec
from tamesu.net.serve import ThreadServer
from tamesu.roles.judge import Judge, JudgeInput, JudgeVerdict, Line
from tamesu.suite.templates import Context

pytestmark = IN_PROCESS_SDKS  # the judge's tests call both SDKs in this process
Serve = Callable[[Any], ThreadServer]
TRANSCRIPT = [Line(role="user", text="Where is my refund?", turn=1),
              Line(role="agent", text="Your refund  RF-889 was issued today.", turn=1)]


def verdict(passed: bool = True, score: float | None = None, **extra: Any) -> str:
    answer: dict[str, Any] = {"pass": passed, "reason": "the agent gave the reference",
                              "evidence": ["refund RF-889 was issued"]}
    if score is not None:
        answer["score"] = score
    return json.dumps({**answer, **extra})


@pytest.fixture(params=[OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
async def judge_server(request: pytest.FixtureRequest, serve: Serve) -> AsyncIterator[tuple[Any, Judge]]:
    server = request.param()
    provider = "openai" if request.param is OpenAIServer else "anthropic"
    spec = ModelSpec(provider=provider, model="test-model", base_url=server.base_url(serve(server.app).url),
                     api_key="local", timeout=5)
    registry = ModelRegistry({"judge": spec})
    yield server, Judge(registry.client("judge"))
    # its providers' connection pools (aiohttp, on this test's loop): left open, each was an "Unclosed connector"
    await registry.aclose()


async def grade(judge: Judge, **given: Any) -> JudgeVerdict:
    return await judge.grade(JudgeInput(rubric="The agent gives a refund reference", transcript=TRANSCRIPT,
                                        **given))


def outcomes(found: JudgeVerdict) -> list[str]:
    return [a.outcome for a in found.attempts]


async def test_an_exact_answer_is_accepted_as_it_came(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(verdict(score=1)))
    found = await grade(judge)
    assert found.passed and outcomes(found) == ["accepted"] and found.unsupported_evidence == []
    assert len(server.calls()) == 1


async def test_a_fenced_answer_is_unwrapped_and_says_so(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(f"```json\n{verdict(score=1)}\n```"))
    found = await grade(judge)
    assert found.passed and outcomes(found) == ["repaired"]
    assert found.attempts[0].reason == "the JSON was inside a markdown code fence: unwrapped"
    assert len(server.calls()) == 1


THOUGHT = 'The rubric wants a reference. If it had none: {"pass": false}. It gave RF-889.'
TAKEN_OUT = "the model's reasoning came at the head of its answer, in <think> tags: taken out"


@pytest.mark.parametrize(("answer", "repairs"), [
    (f"<think>\n{THOUGHT}\n</think>\n\n{verdict(score=1)}", [TAKEN_OUT]),
    # a chat template that opens the block itself: the model writes only its end
    (f"{THOUGHT}\n</think>\n{verdict(score=1)}", [TAKEN_OUT]),
    (f"<think>{THOUGHT}</think>\n```json\n{verdict(score=1)}\n```",
     [TAKEN_OUT, "the JSON was inside a markdown code fence: unwrapped"]),
], ids=["think-block", "closing-tag-only", "think-block-then-fence"])
async def test_reasoning_at_the_head_of_a_verdict_is_taken_out_and_said(judge_server: tuple[Any, Judge], answer: str,
                                                                         repairs: list[str]) -> None:
    # open reasoning models behind llama.cpp, LM Studio or vLLM without a reasoning parser answer this way;
    # read whole, every verdict was "surrounded by other text" and asked again until none was left
    server, judge = judge_server
    server.plan(text(answer))
    found = await grade(judge)
    assert found.passed and outcomes(found) == ["repaired"] and len(server.calls()) == 1
    assert found.attempts[0].reason == "; ".join(repairs)
    [response] = found.responses
    assert response.reasoning == THOUGHT and response.reasoning_in_text
    assert "<think>" not in response.text and "</think>" not in response.text


async def test_reasoning_sent_apart_is_kept_and_the_verdict_accepted_as_it_came(
        judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(reasoned(verdict(score=1), THOUGHT))  # reasoning_content (vLLM, llama.cpp); a thinking block
    found = await grade(judge)
    assert found.passed and outcomes(found) == ["accepted"]
    [response] = found.responses
    assert response.reasoning == THOUGHT and not response.reasoning_in_text and response.text == verdict(score=1)


@pytest.mark.parametrize("answer", [reasoned("", THOUGHT, stop="length"),
                                    reasoned(f"<think>{THOUGHT}", "", stop="length")], ids=["apart", "in-the-text"])
async def test_a_verdict_cut_off_while_the_model_reasoned_says_so(judge_server: tuple[Any, Judge],
                                                                  answer: Any) -> None:
    server, judge = judge_server
    server.plan(answer, answer, answer)
    with pytest.raises(InfraError) as caught:
        await grade(judge)
    cut = "the model was still reasoning when it reached its token limit: no answer came (raise the model's " \
          "max_tokens, or turn its reasoning off)"
    assert str(caught.value) == f"judge: no verdict that fits the schema after 3 attempts (each answer: {cut})"
    assert len(server.calls()) == 3
    assert all(a.reasoning == THOUGHT and a.text == "" for a in caught.value.__cause__.responses)  # type: ignore[union-attr]


async def test_an_answer_withheld_by_the_server_says_so(judge_server: tuple[Any, Judge]) -> None:
    # Azure's content filter ends a completion with no content; Claude ends a refusal with stop_reason refusal
    server, judge = judge_server
    stop = "content_filter" if isinstance(server, OpenAIServer) else "refusal"
    server.plan(*(text("", stop=stop) for _ in range(3)))
    with pytest.raises(InfraError) as caught:
        await grade(judge)
    assert str(caught.value) == ("judge: no verdict that fits the schema after 3 attempts (each answer: the server "
                                 f"withheld the answer (finish reason {stop!r}))")


@pytest.mark.parametrize(("answer", "why"), [
    (f"Here is my verdict: {verdict()} Hope it helps.", "surrounded by other text"),
    (f"The agent fails.\n```json\n{verdict()}\n```", "surrounded by other text"),
    (verdict(passed="yes"), 'pass: Input should be a valid boolean (got "yes")'),  # type: ignore[arg-type]
    (verdict(passed="true"), 'pass: Input should be a valid boolean (got "true")'),  # type: ignore[arg-type]
    (verdict(passed=1), "pass: Input should be a valid boolean (got 1)"),  # type: ignore[arg-type]
    ('{"pass": false, "reason": "no reference", "pass": true, "evidence": []}',
     "the key 'pass' appears twice (false and true)"),
    (verdict(passed=True, score=0), "pass is true but score is 0"),
    (verdict(confidence=0.9), "confidence: Extra inputs are not permitted"),
    ('{"pass": true, "reason": "fine"', "no JSON object in the answer"),
    ('{"passed": true, "reason": "fine"}', "pass: Field required"),
    (verdict(reason=" "), "reason: String should match pattern"),
    ('{"pass": true, "score": NaN, "reason": "fine"}', "NaN is not a JSON number"),
    (verdict(evidence="refund RF-889 was issued"), "evidence: Input should be a valid list"),
    (f"[{verdict()}]", "expected a JSON object, got list"),
    (f"{verdict()}\n{verdict(passed=False, score=0)}", "surrounded by other text"),
])
async def test_a_malformed_answer_is_rejected_then_asked_again(judge_server: tuple[Any, Judge], answer: str,
                                                               why: str) -> None:
    server, judge = judge_server
    server.plan(text(answer), text(verdict(score=1)))
    found = await grade(judge)
    assert found.passed and outcomes(found) == ["rejected", "accepted"]
    assert why in found.attempts[0].reason
    _, second = server.calls()
    # the second request shows the model its answer and what was wrong with it
    repair = json.dumps(second.body)
    assert why.replace('"', '\\"') in repair and "Answer with the JSON object only" in repair


@pytest.mark.parametrize(("answer", "why"), [
    (verdict(passed=False, score=5), "pass is false but score is 5: pass is true exactly when score is 4 or more"),
    (verdict(passed=True, score=9), "score: Input should be less than or equal to 5 (got 9)"),
])
async def test_a_contradiction_on_the_1_to_5_scale_is_never_guessed(judge_server: tuple[Any, Judge], answer: str,
                                                                    why: str) -> None:
    server, judge = judge_server
    server.plan(text(answer), text(answer), text(answer))
    with pytest.raises(InfraError) as caught:
        await grade(judge, scale="1-5")
    assert str(caught.value) == f"judge: no verdict that fits the schema after 3 attempts (each answer: {why})"
    assert len(server.calls()) == 3
    assert caught.value.__cause__.attempts[2].outcome == "rejected"  # type: ignore[union-attr]


async def test_invalid_then_valid_after_asking_again_records_both(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(verdict(passed=False, score=5)), text(verdict(passed=True, score=5)))
    found = await grade(judge, scale="1-5")
    assert found.passed and found.score == 5
    assert [(a.number, a.outcome) for a in found.attempts] == [(1, "rejected"), (2, "accepted")]
    assert found.attempts[0].reason.startswith("pass is false but score is 5")


# ---- evidence -------------------------------------------------------------------------------------------


async def test_quotes_are_found_whatever_the_whitespace_and_case(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(verdict(score=1, evidence=['"YOUR REFUND RF-889\nwas issued"', "the agent apologised",
                                                "Your refund ... issued today", "issued ... Your refund"])))
    found = await grade(judge)
    # words left out with "..." are fine, in the transcript's order only
    assert found.passed and found.unsupported_evidence == ["the agent apologised", "issued ... Your refund"]


async def test_a_verdict_none_of_whose_quotes_is_there_is_the_judges_error(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    invented = verdict(score=1, evidence=["Refund RF-123 is on its way", "sorry for the wait"])
    failed_on_invented = verdict(passed=False, score=0, evidence=["I cannot help"])
    for answer, said in ((invented, "passed it"), (failed_on_invented, "failed it")):
        server.plan(text(answer))
        # pass or fail, it rests on words nobody said: no verdict on the agent (and `negate` cannot turn it)
        with pytest.raises(InfraError, match=f"^judge: {'openai' if 'OpenAI' in type(server).__name__ else 'anthropic'}"
                                             f":test-model {said}, but none of its .* quote\\(s\\) is in what it was "
                                             'shown \\("'):
            await grade(judge)

    server.plan(text(invented))
    lenient = await grade(judge, evidence="lenient")
    assert lenient.passed and lenient.reason == "the agent gave the reference"
    assert lenient.unsupported_evidence == ["Refund RF-123 is on its way", "sorry for the wait"]


async def test_a_failing_verdict_keeps_failing_with_its_quotes_marked(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(verdict(passed=False, score=0, evidence=["I cannot help", "Your refund RF-889"])))
    found = await grade(judge)
    assert not found.passed and found.unsupported_evidence == ["I cannot help"]


async def test_grounded_records_its_own_prompt_and_checks_its_quotes(judge_server: tuple[Any, Judge]) -> None:
    server, judge = judge_server
    server.plan(text(json.dumps({"pass": False, "score": 0.5, "reason": "one claim is not in the policy",
                                 "evidence": ["shipping is FREE"]})))
    found = await judge.grade_grounding("Returns take 30 days. Shipping is free.", "Returns: 30 days")
    assert found.prompt_version == "grounded.v1" and found.unsupported_evidence == []
    [call] = server.calls()
    assert "List every factual claim" in json.dumps(call.body)


# ---- through the command: a non-completion is one test's error; so is any unexpected exception -----------

BROKEN_CHECK = '''\
from pydantic import BaseModel
from tamesu.checks.base import Check
from tamesu.plugins import register


class Spec(BaseModel):
    pass


@register("checks", "explode")
class Explode(Check):
    key = "explode"
    Spec = Spec

    async def evaluate(self, run):
        raise RuntimeError("a bug inside one check")
'''

LAUNCHER = '''\
import sys
sys.path.insert(0, ".")
import broken_check  # a check with a bug, registered as a built-in is
from tamesu.cli.main import entry
sys.argv[0] = "tamesu"
entry()
'''

GUARDED_SUITE = """\
targets:
  desk: {{ type: rest, url: "{agent}/chat" }}
tests:
  - name: a judge behind a web page
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent greets" }} ]
  - name: a buggy check
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ explode: {{}} }}, {{ contains: "How" }} ]
  - name: a simulator that answers another API
    target: desk
    persona: {{ name: Ada }}
    scenario: {{ goal: "Ask for help", max_turns: 2 }}
  - name: still runs
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ contains: "How can I help" }} ]
"""


async def _desk(request: Request) -> JSONResponse:
    return JSONResponse({"text": "How can I help?"})


@pytest.fixture
def desk(serve: Serve) -> str:
    return serve(Starlette(routes=[Route("/chat", _desk, methods=["POST"])])).url


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
def test_a_non_completion_and_a_bug_are_each_one_tests_error(tmp_path: Path, serve: Serve, desk: str,
                                                             server_class: type) -> None:
    provider = "openai" if server_class is OpenAIServer else "anthropic"
    judge, simulator = server_class(), server_class()
    judge.plan(raw("<html><body>Welcome to the proxy</body></html>", "text/html"))
    simulator.plan(raw({"id": "x", "object": "list", "data": []}))
    judge_url = judge.base_url(serve(judge.app).url)
    simulator_url = simulator.base_url(serve(simulator.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  judge: {{ provider: {provider}, model: test-model, base_url: '{judge_url}', timeout: 5s }}\n"
        f"  simulator: {{ provider: {provider}, model: test-model, base_url: '{simulator_url}', timeout: 5s }}\n")
    (tmp_path / "suite.yaml").write_text(GUARDED_SUITE.format(agent=desk))
    (tmp_path / "broken_check.py").write_text(BROKEN_CHECK)
    (tmp_path / "launch.py").write_text(LAUNCHER)
    env = {"NO_COLOR": "1", "COLUMNS": "200", "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    # the launcher forked from the worker's warm process, which has tamesu and both SDKs imported (a fresh
    # interpreter spent some 2 s of CPU importing them)
    result = forked.run(["run", "--out", "out"], tmp_path, {**os.environ, **env}, 120, script="launch.py")
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert "Traceback" not in output
    what = "chat completion" if provider == "openai" else "Messages answer"
    assert (f"judge: {provider}:test-model: HTTP 200 but not a {what} (the body is text: "
            '"<html><body>Welcome to the proxy</body></html>")') in output
    assert f"simulator: {provider}:test-model: HTTP 200 but not a {what} (the JSON has no " in output
    assert "internal error: RuntimeError: a bug inside one check (traceback in run-1/traceback.txt)" in output
    assert "PASS  suite/still runs" in output
    [directory] = list((tmp_path / "out").iterdir())
    lines = {json.loads(x)["test"]: json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()}
    assert {name: line["status"] for name, line in lines.items()} == {
        "a judge behind a web page": "error", "a buggy check": "error",
        "a simulator that answers another API": "error", "still runs": "passed"}
    summary = json.loads((directory / "run.json").read_text())
    assert summary["exit_code"] == 3 and summary["counts"]["total"] == 4 and summary["counts"]["error"] == 3
    buggy = directory / lines["a buggy check"]["runs"][0]["dir"]
    assert "RuntimeError: a bug inside one check" in (buggy / "traceback.txt").read_text()
    detail = json.loads((buggy / "result.json").read_text())
    # the other assertion of the buggy test was still graded
    assert [(a["name"], a["passed"]) for a in detail["assertions"]] == [("explode", False), ("contains", True)]
    assert len(judge.calls()) == 1 and len(simulator.calls()) == 1  # a wrong endpoint is not retried


def test_a_reasked_verdict_and_a_retry_are_in_the_result_events_and_metrics(tmp_path: Path, tamesu: Any,
                                                                           serve: Serve, desk: str) -> None:
    judge = OpenAIServer()
    judge.plan(status(429, "slow down", retry_after="0"),
               text('Verdict: {"pass": true, "reason": "greets", "evidence": ["How can I help?"]}'),
               text('{"pass": true, "reason": "it offers help", "evidence": ["how can I help"]}'),
               *(text('{"pass": false, "score": 5, "reason": "helpful", "evidence": []}') for _ in range(3)))
    url = judge.base_url(serve(judge.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  judge: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 5s }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk}/chat" }}
tests:
  - name: judged
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent offers help" }} ]
  - name: never decided
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: {{ rubric: "The agent is helpful", scale: 1-5 }} }} ]
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 3, result.stdout + result.stderr
    assert ("ERR   suite/never decided" in result.stdout and "judge: no verdict that fits the schema after 3 "
            "attempts (each answer: pass is false but score is 5") in result.stdout, result.stdout
    [directory] = list((tmp_path / "out").iterdir())
    assert "attempt 1 rejected: the JSON object was surrounded" in (directory / "report.html").read_text()
    lines = {json.loads(x)["test"]: json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()}
    undecided = json.loads((directory / lines["never decided"]["runs"][0]["dir"] / "result.json").read_text())
    # three answers, two asked again (before: a verdict_reasked event for the third too, "3 judge answers asked again")
    assert [e["data"]["attempt"] for e in undecided["events"] if e["name"] == "verdict_reasked"] == [1, 2]
    assert "3 judge answers asked again (verdict_reasked, 2 tests)" in result.stdout  # the judged 1, this one 2
    assert [a["outcome"] for a in undecided["assertions"][0]["attempts"]] == ["rejected"] * 3
    assert (undecided["assertions"][0]["model"], undecided["assertions"][0]["prompt_version"]) == (
        "openai:test-model", "judge.v1")  # who never answered in shape, with which prompt
    assert not undecided["assertions"][0]["passed"] and undecided["status"] == "error"
    line = lines["judged"]
    detail = json.loads((directory / line["runs"][0]["dir"] / "result.json").read_text())
    [judged] = detail["assertions"]
    assert judged["passed"] and judged["prompt_version"] == "judge.v1"
    assert [(a["number"], a["outcome"]) for a in judged["attempts"]] == [(1, "rejected"), (2, "accepted")]
    assert judged["reason"] == ("it offers help [attempt 1 rejected: the JSON object was surrounded by other "
                                "text; answer with the object alone]")
    events = {e["name"]: e["data"] for e in detail["events"]}
    assert events["verdict_reasked"] == {"assertion": "judge", "attempt": 1, "reason": judged["attempts"][0]["reason"]}
    assert events["model_retry"]["attempt"] == 2 and events["model_retry"]["purpose"] == "judge"
    assert detail["metrics"]["llm_retries"] == 1 and detail["metrics"]["llm_timeouts"] == 0


async def test_a_packs_judges_keep_what_was_done_to_their_answers(serve: Serve, tmp_path: Path) -> None:
    server = OpenAIServer()
    spec = ModelSpec(provider="openai", model="test-model", base_url=server.base_url(serve(server.app).url),
                     api_key="local", timeout=5)
    server.plan(text('Sure! {"pass": true, "reason": "polite", "evidence": ["Thank you"]}'),
                text('{"pass": true, "reason": "polite", "evidence": ["thank you", "you are great"]}'))
    registry = ModelRegistry({"judge": spec})
    run = RunView(exchanges=[Exchange(1, UserTurn(text="hi"), AgentTurn(text="Thank you for asking."))],
                  metrics={}, captured={}, events=[], tool_calls=[], context=Context(), base_dir=tmp_path,
                  models=registry)
    pack = parse_assertion({"pack": {"name": "manners", "assert": [{"judge": "The agent is polite"}]}})
    try:
        found = await pack.check.evaluate(run)
    finally:
        await registry.aclose()
    assert found.passed
    assert [(a.number, a.outcome) for a in found.attempts] == [(1, "rejected")]
    assert found.attempts[0].reason.startswith("judge: the JSON object was surrounded by other text")
    assert found.unsupported_evidence == ["judge: you are great"]


async def test_grounded_min_decides_on_the_supported_fraction(serve: Serve, tmp_path: Path) -> None:
    server = OpenAIServer()
    spec = ModelSpec(provider="openai", model="test-model", base_url=server.base_url(serve(server.app).url),
                     api_key="local", timeout=5)
    half = json.dumps({"pass": False, "score": 0.5, "reason": "one of two claims", "evidence": ["ships free"]})
    invented = json.dumps({"pass": True, "score": 1, "reason": "all supported", "evidence": ["never said"]})
    server.plan(text(half), text(half), text(invented))
    registry = ModelRegistry({"judge": spec})
    run = RunView(exchanges=[Exchange(1, UserTurn(text="hi"), AgentTurn(text="Returns take 30 days; it ships free."))],
                  metrics={}, captured={}, events=[], tool_calls=[], context=Context(), base_dir=tmp_path,
                  models=registry)
    lenient_min = parse_assertion({"grounded": {"context": "Returns: 30 days", "min": 0.5}})
    strict_min = parse_assertion({"grounded": {"context": "Returns: 30 days"}})
    try:
        assert (await lenient_min.check.evaluate(run)).passed
        assert not (await strict_min.check.evaluate(run)).passed
        with pytest.raises(InfraError, match="passed it, but none of its 1 quote"):  # the judge's, not the agent's
            await strict_min.check.evaluate(run)
    finally:
        await registry.aclose()


def test_invented_quotes_make_the_run_an_error_of_the_judge_never_a_failure_of_the_agent(
        tmp_path: Path, tamesu: Any, serve: Serve, desk: str) -> None:
    judge = OpenAIServer()
    judge.plan(text('{"pass": true, "reason": "it greets", "evidence": ["Welcome to Acme!"]}'),
               text('{"pass": false, "score": 0.5, "reason": "one claim is made up", '
                    '"evidence": ["Shipping is free"]}'))
    url = judge.base_url(serve(judge.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  judge: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 5s }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk}/chat" }}
tests:
  - name: judged
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent greets" }} ]
  - name: grounded
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ grounded: "The desk helps customers." }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 3, result.stdout + result.stderr
    [directory] = list((tmp_path / "out").iterdir())
    lines = {json.loads(x)["test"]: json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()}
    for name, said, label in (("judged", "passed it", ""), ("grounded", "failed it", "grounded: ")):
        [run] = lines[name]["runs"]
        assert (run["status"], run["fault"]) == ("error", "environment"), lines[name]
        assert run["error"].startswith(f"{label}judge: openai:test-model {said}, but none of its 1 quote(s) is in "
                                       "what it was shown"), run["error"]
    # the verdict not taken keeps its record (before: model, prompt_version null, attempts [])
    kept = {}
    for name in ("judged", "grounded"):
        [checked] = json.loads((directory / lines[name]["runs"][0]["dir"] / "result.json").read_text())["assertions"]
        kept[name] = {k: checked[k] for k in ("passed", "model", "prompt_version", "attempts", "unsupported_evidence")}
    assert kept == {
        "judged": {"passed": False, "model": "openai:test-model", "prompt_version": "judge.v1",
                   "attempts": [{"number": 1, "outcome": "accepted", "reason": ""}],
                   "unsupported_evidence": ["Welcome to Acme!"]},
        "grounded": {"passed": False, "model": "openai:test-model", "prompt_version": "grounded.v1",
                     "attempts": [{"number": 1, "outcome": "accepted", "reason": ""}],
                     "unsupported_evidence": ["Shipping is free"]}}
