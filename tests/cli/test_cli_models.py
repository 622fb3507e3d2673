"""Model-driven runs through the `tamesu` command, against local model servers written for the tests:
a persona and a judge on the real provider code paths, recorded then replayed offline with the server
stopped, a budget that stops the run with exit 4, and a fake judge that has no rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import AnthropicServer, OpenAIServer, status, text, tool_call
from ports import refused_port
from tamesu.net.serve import ThreadServer


async def _refund_desk(request: Request) -> JSONResponse:
    message = (await request.json())["message"]
    if "refund" in message.lower() and "ORD-" not in message:
        return JSONResponse({"text": "Which order is it?"})
    if "ORD-" in message:
        return JSONResponse({"text": "Refund issued for your order, reference RF-889."})
    return JSONResponse({"text": "How can I help?"})


@pytest.fixture
def agent_url(serve) -> str:
    return serve(Starlette(routes=[Route("/chat", _refund_desk, methods=["POST"])])).url


def sim(words: str, **flags: bool) -> str:
    return json.dumps({"input": words, "goal_achieved": False, "stop": False, "reasoning": "playing Marta", **flags})


SUITE = """\
targets:
  desk: {{ type: rest, url: "{agent}/chat" }}
tests:
  - name: refund
    target: desk
    persona: {{ name: Marta, style: short and direct }}
    scenario: {{ goal: "Get a refund for order ORD-1001", max_turns: 4 }}
    assert:
      - judge: "The agent gives a refund reference"
      - contains: RF-889
"""


def project(tmp_path: Path, provider: str, extra: str = "") -> None:
    # a generous timeout: the model server answers in this process, and on a loaded machine an answer took
    # over 5 s; the timeout's retry then took the next planned answer and every later one was off by one
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\n"
        "cache: { dir: recorded }\n"
        "models:\n"
        f"  simulator: {{ provider: {provider}, model: test-model, base_url: '{{{{env.MODEL_URL}}}}', timeout: 60s }}\n"
        f"  judge: {{ provider: {provider}, model: test-model, base_url: '{{{{env.MODEL_URL}}}}', timeout: 60s }}\n"
        + extra)


def run_dir(out: Path) -> Path:
    [found] = list(out.iterdir())
    return found


def outcome(out: Path) -> tuple[list[str], list[dict]]:
    directory = run_dir(out)
    [line] = [json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()]
    detail = json.loads((directory / line["runs"][0]["dir"] / "result.json").read_text())
    said = [f"{t['user']['text']} -> {t['agent']['text']}" for t in detail["turns"]]
    verdicts = [{k: a[k] for k in ("name", "passed", "reason", "model", "prompt_version", "fake")}
                for a in detail["assertions"]]
    return said, verdicts


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
def test_record_with_a_model_server_then_replay_offline(tmp_path: Path, tamesu, agent_url: str,
                                                        server_class: type) -> None:
    provider = "openai" if server_class is OpenAIServer else "anthropic"
    model_server = server_class()
    model_server.plan(
        text(sim("Hi, I want a refund")),
        text('{"input": "My order is ORD-1'),                  # cut off: repaired by asking again
        text(sim("It is order ORD-1001")),
        status(429, "slow down", retry_after="0"),            # rate limited: retried
        text(sim("", goal_achieved=True)),
        text(json.dumps({"pass": True, "score": 1, "reason": "the agent gave RF-889", "evidence": ["RF-889"]})),
    )
    server = ThreadServer(model_server.app).start()
    env = {"MODEL_URL": model_server.base_url(server.url), "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    project(tmp_path, provider)
    (tmp_path / "suite.yaml").write_text(SUITE.format(agent=agent_url))
    try:
        recorded = tamesu(["run", "--out", "rec"], cwd=tmp_path, env=env)
    finally:
        server.stop()
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    said, verdicts = outcome(tmp_path / "rec")
    assert said == ["Hi, I want a refund -> Which order is it?",
                    "It is order ORD-1001 -> Refund issued for your order, reference RF-889."]
    assert verdicts[0] == {"name": "judge", "passed": True, "reason": "the agent gave RF-889",
                           "model": f"{provider}:test-model", "prompt_version": "judge.v1", "fake": False}
    calls = model_server.calls()
    assert len(calls) == 6  # three simulator answers, one repair, one retry after the 429, one verdict
    [line] = [json.loads(x) for x in (run_dir(tmp_path / "rec") / "results.jsonl").read_text().splitlines()]
    detail = json.loads((run_dir(tmp_path / "rec") / line["runs"][0]["dir"] / "result.json").read_text())
    events = [(e["name"], e["data"].get("attempt")) for e in detail["events"]
              if e["name"] in ("simulator_reasked", "model_retry")]
    assert events == [("simulator_reasked", 1), ("model_retry", 2)]  # the cut-off answer, then the 429
    assert detail["metrics"]["llm_retries"] == 1
    judge_body = calls[-1].body
    assert judge_body.get("temperature") == 0
    if provider == "openai":
        assert isinstance(calls[0].body["seed"], int)
    assert list((tmp_path / "recorded").rglob("*.json")), "nothing was recorded"
    # the run's spend in all, in run.json and on the console (it was only in each run's metrics)
    spent = json.loads((run_dir(tmp_path / "rec") / "run.json").read_text())["models"]
    assert {k: spent[k] for k in ("calls", "cached_calls", "retries", "timeouts", "usd")} == {
        "calls": 5, "cached_calls": 0, "retries": 1, "timeouts": 0, "usd": 0.0}
    assert spent["input_tokens"] > 0 and spent["output_tokens"] > 0
    assert (f"models: 5 calls, {spent['input_tokens'] + spent['output_tokens']:,} tokens, $0.00, 1 retried"
            in recorded.stdout), recorded.stdout

    replayed = tamesu(["run", "--out", "replay", "--cache-only"], cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert outcome(tmp_path / "replay") == (said, verdicts)
    replay_spent = json.loads((run_dir(tmp_path / "replay") / "run.json").read_text())["models"]
    assert (replay_spent["calls"], replay_spent["cached_calls"], replay_spent["usd"]) == (0, 5, 0.0)
    assert "models: no call made (5 answered from the replay cache), 0 tokens, $0.00" in replayed.stdout, \
        replayed.stdout

    (tmp_path / "suite.yaml").write_text(SUITE.format(agent=agent_url).replace("ORD-1001", "ORD-2002"))
    missed = tamesu(["run", "--out", "miss", "--cache-only"], cwd=tmp_path, env=env)
    assert missed.returncode == 3
    assert "cache miss" in missed.stdout


def test_a_budget_stops_the_run_with_exit_4_and_keeps_what_finished(tmp_path: Path, tamesu,
                                                                     agent_url: str, serve) -> None:
    model_server = OpenAIServer()
    server = serve(model_server.app)
    project(tmp_path, "openai", extra="budget: { usd: 0.01 }\n")
    priced = (tmp_path / "tamesu.yaml").read_text().replace(
        "timeout: 60s }", "timeout: 60s, price: { input_per_mtok: 100000, output_per_mtok: 100000 } }")
    (tmp_path / "tamesu.yaml").write_text(priced)
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: scripted first
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ contains: help }} ]
  - name: expensive persona
    target: desk
    persona: {{ name: Marta }}
    scenario: {{ goal: "Get a refund" }}
  - name: never started
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
""")
    model_server.plan(text(sim("I want a refund")))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"MODEL_URL": model_server.base_url(server.url)})
    assert result.returncode == 4, result.stdout + result.stderr
    assert "stopped early: the budget was exceeded" in result.stdout
    lines = {json.loads(x)["test"]: json.loads(x) for x in (run_dir(tmp_path / "out") / "results.jsonl")
             .read_text().splitlines()}
    assert lines["scripted first"]["status"] == "passed"
    assert lines["expensive persona"]["status"] == "error"
    assert "budget of $0.01 exceeded" in lines["expensive persona"]["runs"][0]["error"]
    assert lines["never started"]["status"] == "skipped"
    assert len(model_server.calls()) == 1  # nothing more was paid for once the budget was spent
    summary = json.loads((run_dir(tmp_path / "out") / "run.json").read_text())
    assert summary["exit_code"] == 4


def test_a_simulator_that_never_answers_in_shape_keeps_every_answer_in_the_error(tmp_path: Path, tamesu,
                                                                                 agent_url: str, serve) -> None:
    # before: the run errored with only the last problem, and its simulator_reasked events were dropped
    model_server = OpenAIServer()
    model_server.plan(text("Sure, I will ask about my refund."), text(sim("")), text('{"goal": "refund"}'))
    project(tmp_path, "openai")
    (tmp_path / "suite.yaml").write_text(SUITE.format(agent=agent_url))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path,
                    env={"MODEL_URL": model_server.base_url(serve(model_server.app).url), "OPENAI_API_KEY": ""})
    assert result.returncode == 3, result.stdout + result.stderr
    said = ("simulator: no valid JSON after 3 attempts: attempt 1: no JSON object found in the answer; attempt 2: "
            "input is empty and the answer does not stop; write the user's next message; attempt 3: input: Field "
            "required")
    assert said in result.stdout, result.stdout
    [line] = [json.loads(x) for x in (run_dir(tmp_path / "out") / "results.jsonl").read_text().splitlines()]
    detail = json.loads((run_dir(tmp_path / "out") / line["runs"][0]["dir"] / "result.json").read_text())
    assert (detail["status"], detail["error"]) == ("error", said)
    assert [(e["data"]["attempt"], e["data"]["reason"]) for e in detail["events"] if e["name"] == "simulator_reasked"] \
        == [(1, "no JSON object found in the answer"),
            (2, "input is empty and the answer does not stop; write the user's next message")]  # the 3rd: the error
    assert "along the way: 2 simulated user answers asked again (simulator_reasked, 1 test)" in result.stdout
    assert len(model_server.calls()) == 3


def test_a_fake_judge_without_a_matching_rule_fails_loudly(tmp_path: Path, tamesu, agent_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\n"
        "models:\n"
        "  judge: { provider: fake, rules: [ { rubric: '(?i)weather', pass: true, reason: sunny } ] }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: judged
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent offers help" }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout
    assert "ERR   suite/judged" in result.stdout
    assert "fake judge: no rule matches rubric" in result.stdout
    [line] = [json.loads(x) for x in (run_dir(tmp_path / "out") / "results.jsonl").read_text().splitlines()]
    assert line["status"] == "error"


def test_a_fake_judge_verdict_is_labelled_fake(tmp_path: Path, tamesu, agent_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\n"
        "models:\n"
        "  judge: { provider: fake, rules: [ { rubric: '(?i)help', transcript: '(?i)how can i help', pass: true,"
        " reason: offers help }, { rubric: '(?i)help', pass: false, reason: no offer } ] }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: judged
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent offers help" }} ]
  - name: judged badly
    target: desk
    scenario: {{ script: [ {{ say: "I want a refund" }} ] }}
    assert: [ {{ judge: "The agent offers help" }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert '✗ judge: rubric "The agent offers help": no offer (fake judge)' in result.stdout
    directory = run_dir(tmp_path / "out")
    lines = {json.loads(x)["test"]: json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()}
    passed = json.loads((directory / lines["judged"]["runs"][0]["dir"] / "result.json").read_text())
    assert passed["assertions"][0]["fake"] is True and passed["assertions"][0]["passed"] is True


def test_grounded_against_a_text_context_with_the_fake_judge(tmp_path: Path, tamesu, agent_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\n"
        "models:\n"
        "  judge:\n"
        "    provider: fake\n"
        "    rules:\n"
        "      - { check: grounded, transcript: 'RF-889', context: 'refunds take 5 days', pass: false,"
        " reason: 'the reference is not in the policy', evidence: ['RF-889'] }\n"
        "      - { check: grounded, pass: true, reason: 'every claim is in the policy' }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: offers help
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ grounded: {{ context: "Policy: refunds take 5 days." }} }} ]
  - name: invents a reference
    target: desk
    scenario: {{ script: [ {{ say: "refund ORD-1" }} ] }}
    assert: [ {{ grounded: {{ context: "Policy: refunds take 5 days." }} }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "PASS  suite/offers help" in result.stdout
    assert "✗ grounded: the reference is not in the policy (fake judge)" in result.stdout


def test_a_model_target_against_an_openai_compatible_server(tmp_path: Path, tamesu, serve) -> None:
    model_server = OpenAIServer()
    server = serve(model_server.app)
    model_server.plan(tool_call("lookup_order", {"order_id": "ORD-1001"}), text("ORD-1001 arrives on Friday."))
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\n"
        "models:\n"
        "  target: { provider: openai, model: test-model, base_url: '{{env.MODEL_URL}}', timeout: 60s }\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot:
    type: model
    system: "You are the shop's assistant. Use the tools."
    temperature: 0.2
    tools:
      - name: lookup_order
        description: Look an order up
        parameters: { type: object, properties: { order_id: { type: string } }, required: [order_id] }
        result: { order_id: "{{args.order_id}}", eta: Friday }
tests:
  - name: where is my order
    target: bot
    scenario: { script: [ { say: "Where is ORD-1001?" } ] }
    assert:
      - tool_called: { name: lookup_order, args: { order_id: ORD-1001 } }
      - contains: Friday
      - metric: { name: model_calls, equals: 2 }
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"MODEL_URL": model_server.base_url(server.url)})
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = (call.body for call in model_server.calls())
    assert first["messages"][0] == {"role": "system", "content": "You are the shop's assistant. Use the tools."}
    assert first["tools"][0]["function"]["name"] == "lookup_order" and first["temperature"] == 0.2
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"]) == {"order_id": "ORD-1001", "eta": "Friday"}


def test_an_api_key_with_a_trailing_newline_is_one_line_naming_it(tmp_path: Path, tamesu, serve) -> None:
    model_server = OpenAIServer()
    server = serve(model_server.app)
    (tmp_path / "s.tamesu.yaml").write_text(
        "models:\n  m: { provider: openai, model: test-model, base_url: '{{env.MODEL_URL}}' }\n"
        "targets:\n  bot: { type: model, model: m }\n"
        "tests:\n  - { name: one, target: bot, scenario: { script: [ { say: hi } ] } }\n")
    # a mounted secret or a pasted value keeps its newline; sent as it was, the HTTP client raised an internal error
    result = tamesu(["run", "--out", "out"], cwd=tmp_path,
                    env={"MODEL_URL": model_server.base_url(server.url), "OPENAI_API_KEY": "sk-test-4711\n"})
    assert result.returncode == 3, result.stdout + result.stderr
    assert ("openai: the API key from OPENAI_API_KEY begins or ends with a line break or spaces, which an HTTP "
            "header cannot carry: remove them") in result.stdout, result.stdout
    assert "internal error" not in result.stdout and "sk-test-4711" not in result.stdout
    assert model_server.calls() == []


def test_a_judge_that_cannot_be_reached_is_said_once(tmp_path: Path, tamesu, agent_url: str) -> None:
    # the run's error line and the judge's own "not decided" line said the same thing twice, one under the other
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nstore: false\nmodels:\n"
        f"  judge: {{ provider: openai, model: test-model, base_url: 'http://127.0.0.1:{refused_port()}/v1', "
        "api_key: x, max_retries: 0, timeout: 5s }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: greets
    target: desk
    scenario: {{ script: [ {{ say: hello }} ] }}
    assert: [ {{ judge: "The agent greets" }}, {{ judge: "The agent offers help" }}, {{ contains: nothing }} ]
""")
    result = tamesu(["run", "--out", "out", "--color", "never", "--report", "junit:junit.xml"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    # JUnit's error text too: the fault named alone, the error line, the second judge, the contains
    import xml.etree.ElementTree as ET

    [error] = list(ET.parse(tmp_path / "junit.xml").getroot().iter("error"))
    text = (error.text or "").splitlines()
    assert text[0] == "fault environment"
    assert text[1].startswith("error: assert[0]/judge: openai:test-model: cannot reach"), text  # two judges
    assert sum("cannot reach" in line for line in text) == 2, text
    lines = result.stdout.splitlines()
    said = [line.strip() for line in lines if "cannot reach" in line]
    # the first judge's reason is the run's error; the second's and the contains' own lines stay
    assert said[0].startswith("! assert[0]/judge: openai:test-model: cannot reach"), said  # two judges
    assert len(said) == 2 and said[1].startswith("✗ assert[1]/judge: not decided: "), said
    assert any(line.strip().startswith("✗ contains") for line in lines), lines


def test_a_fallback_names_another_model_of_the_same_models(tmp_path: Path, tamesu, agent_url: str, serve) -> None:
    # before: `fallback: backup`, backup a model beside it, was "unknown model provider 'backup'"
    model_server = OpenAIServer()
    model_server.plan(text(json.dumps({"pass": True, "reason": "it gave RF-889", "evidence": ["RF-889"]})))
    url = model_server.base_url(serve(model_server.app).url)
    project_text = (
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  judge: {{ provider: openai, model: primary, base_url: 'http://127.0.0.1:{refused_port()}/v1', "
        "max_retries: 0, fallback: backup }\n"
        f"  backup: {{ provider: openai, model: test-model, base_url: '{url}' }}\n")
    (tmp_path / "tamesu.yaml").write_text(project_text)
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: judged
    scenario: {{ script: [ {{ say: "A refund for ORD-1001" }} ] }}
    assert: [ {{ judge: "The agent gives a refund reference" }} ]
""")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"OPENAI_API_KEY": "local"})
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [json.loads(x) for x in (run_dir(tmp_path / "out") / "results.jsonl").read_text().splitlines()]
    detail = json.loads((run_dir(tmp_path / "out") / line["runs"][0]["dir"] / "result.json").read_text())
    [fallback] = [e["data"] for e in detail["events"] if e["name"] == "model_fallback"]
    assert (fallback["model"], fallback["fallback"]) == ("openai:primary", "openai:test-model")
    assert detail["assertions"][0]["model"] == "openai:test-model"
    (tmp_path / "tamesu.yaml").write_text(project_text.replace("fallback: backup", "fallback: bakup"))
    refused = tamesu(["validate"], cwd=tmp_path)
    assert refused.returncode == 2
    assert ("models.judge.fallback: 'bakup' is neither provider:model nor another model of the same models: "
            "(nor, in a suite, of tamesu.yaml's) (providers: ") in refused.stdout + refused.stderr


def test_a_suites_fallback_may_name_a_model_of_tamesu_yaml(tmp_path: Path, tamesu, agent_url: str, serve) -> None:
    # before: "models.judge.fallback: 'backup' is neither provider:model nor another model of the same models:",
    # though a target's or an assertion's `model:` in the same suite could name it
    model_server = OpenAIServer()
    model_server.plan(text(json.dumps({"pass": True, "reason": "it gave RF-889", "evidence": ["RF-889"]})))
    url = model_server.base_url(serve(model_server.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  backup: {{ provider: openai, model: test-model, base_url: '{url}' }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
models:
  judge: {{ provider: openai, model: primary, base_url: 'http://127.0.0.1:{refused_port()}/v1', max_retries: 0,
           fallback: backup }}
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: judged
    scenario: {{ script: [ {{ say: "A refund for ORD-1001" }} ] }}
    assert: [ {{ judge: "The agent gives a refund reference" }} ]
""")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"OPENAI_API_KEY": "local"})
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [json.loads(x) for x in (run_dir(tmp_path / "out") / "results.jsonl").read_text().splitlines()]
    detail = json.loads((run_dir(tmp_path / "out") / line["runs"][0]["dir"] / "result.json").read_text())
    [fallback] = [e["data"] for e in detail["events"] if e["name"] == "model_fallback"]
    assert (fallback["model"], fallback["fallback"]) == ("openai:primary", "openai:test-model")


def test_a_simulator_with_no_key_or_no_server_is_one_line_and_exit_3(tmp_path: Path, tamesu, agent_url: str) -> None:
    # reliability.md's rows for a first persona run without a model: what `validate`, `run` and `doctor` say
    suite = f"""\
targets:
  desk: {{ type: rest, url: "{agent_url}/chat" }}
tests:
  - name: refund
    target: desk
    persona: {{ name: Marta }}
    scenario: {{ goal: "Get a refund for order ORD-1001" }}
"""
    no_key = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    local = f"{{ provider: openai, model: llama3.1, base_url: 'http://127.0.0.1:{refused_port()}/v1' }}"
    for name, model, line in (
            ("cloud", "openai:gpt-4o-mini", "! simulator: openai: no API key (set OPENAI_API_KEY or models.X.api_key)"),
            ("local", local, "! simulator: openai:llama3.1: cannot reach http://127.0.0.1:")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\nstore: false\nmodels:\n  simulator: {model}\n")
        (folder / "suite.yaml").write_text(suite)
        validated = tamesu(["validate"], cwd=folder, env=no_key)
        assert validated.returncode == 0, validated.stdout + validated.stderr  # no key is read before a run
        done = tamesu(["run", "--out", "out", "--color", "never"], cwd=folder, env=no_key)
        assert done.returncode == 3, done.stdout + done.stderr
        said = [text.strip() for text in done.stdout.splitlines() if text.strip().startswith("! ")]
        assert len(said) == 1 and said[0].startswith(line), done.stdout
        assert "Traceback" not in done.stdout + done.stderr
        doctor = tamesu(["doctor"], cwd=folder, env=no_key)
        assert doctor.returncode == 3, doctor.stdout + doctor.stderr
        assert any(text.startswith("FAIL  models.simulator") for text in doctor.stdout.splitlines()), doctor.stdout
