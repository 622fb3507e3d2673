"""The design's `options` of a JSONL case where they matter most: a connector is the model a model target answers
with (the case's, a turn's own, `-c` over both), refused where it is written when it names no model; run
in-process against fake models and through `tamesu test` as a user types it."""

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
from jsonl.test_jsonl_run import project, run_cases
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.plan.targets import Resolver

__all__ = ["expense_agent"]


def test_a_connector_naming_no_model_is_refused_where_it_is_written_on_a_model_target(tmp_path: Path) -> None:
    text = "\n".join(json.dumps(case) for case in [
        {"id": "a", "input": "hi", "options": {"connector": "nope"}},
        {"id": "b", "turns": [{"input": "hi"}, {"input": "x", "options": {"connector": "nope2"}}]},
        {"id": "c", "input": "hi", "options": {"connector": "openai:gpt-4o-mini"}}])
    resolver = Resolver(models={"bot", "terse"})
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(resolver, target_type="model"))
    assert [str(p) for p in caught.value.problems] == [
        "cases.jsonl:1:53: options.connector: no model named 'nope' under models: (models: bot, terse)",
        "cases.jsonl:2:80: turns[1].options.connector: no model named 'nope2' under models: (models: bot, terse)"]
    # any other target gets the connector as options.connector, whatever it names
    assert len(parse_text(text, "cases.jsonl", tmp_path, ParseSettings(resolver, target_type="rest"))) == 3


def test_c_naming_no_model_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    folder = project(tmp_path, "http://127.0.0.1:9")
    (folder / "cases.jsonl").write_text(json.dumps({"id": "a", "input": "hi"}) + "\n")
    done = run_test(["-i", "cases.jsonl", "-n", "bot", "-c", "nope", "--out", str(tmp_path / "runs")], cwd=folder)
    assert (done.returncode, done.stderr.strip()) == (
        2, "tamesu test: -c nope: no model named 'nope' under models: (models: bot, simulator, terse)"), done.stdout
    assert not (tmp_path / "runs").exists()


async def test_a_turns_own_connector_answers_that_turn_on_a_model_target(tmp_path: Path) -> None:
    folder = project(tmp_path, "http://127.0.0.1:9")
    text = json.dumps({"id": "t", "on_missing_input": "end", "turns": [
        {"input": "File it"}, {"input": "And now?", "options": {"connector": "terse"}}, {"input": "Again"}]})
    outcome, _ = await run_cases(folder, text, target="bot")
    (record,) = outcome.records
    assert [t.output for t in record.turns or []] == [
        "Which expense do you mean?", "Done.", "Which expense do you mean?"]
    # -c is the model of every turn, a turn's own connector included
    outcome, _ = await run_cases(folder, text.replace('"terse"', '"bot"'), target="bot", connector="terse")
    (record,) = outcome.records
    assert [t.output for t in record.turns or []] == ["Done.", "Done.", "Done."]


def _simulator_agent(asked: list[dict[str, Any]]) -> Starlette:
    """A simulator agent over REST (the design's interface) that keeps what it was sent."""

    async def simulate(request: Request) -> JSONResponse:
        body = await request.json()
        asked.append(body)
        return JSONResponse({"goal_achieved": True} if body["options"]["metadata"]["turn_count"] > 1
                            else {"input": "Business travel, $3500"})

    return Starlette(routes=[Route("/simulate", simulate, methods=["POST"])])


async def test_the_simulators_connector_is_its_model(expense_agent: ExpenseAgent, serve: Any, tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []
    helper = serve(_simulator_agent(asked))
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  user-sim: {{ type: rest, url: \"{helper.url}/simulate\" }}\n", 1))
    start = {"input": "I want to submit an expense", "max_turns": 3}
    # a model simulator answers with the connector's model (terse: "Done."), not the one `use` names
    # (the fake simulator says its goal first, then what its rules say: "Business travel, $3500" here)
    outcome, _ = await run_cases(folder, json.dumps({"id": "m", "input": "Hmm", "max_turns": 3, "simulator": {
        "use": "simulator", "options": {"connector": "terse", "metadata": {"goal": "I want to submit an expense"}}}}))
    (record,) = outcome.records
    assert [t.input for t in record.turns or []] == ["Hmm", "I want to submit an expense", "Done."]
    # a simulator agent is sent the connector as options.connector, as a validator agent is
    outcome, _ = await run_cases(folder, json.dumps({"id": "t", **start, "simulator": {
        "use": "agents:user-sim", "options": {"connector": "terse"}}}))
    assert [body["options"].get("connector") for body in asked] == ["terse", "terse"]
    assert outcome.records[0].status == "passed"
    # a script is given the options as written
    (folder / "seen.py").write_text("def simulate(inputs):\n    return {'goal_achieved': True, "
                                    "'reasoning': repr(inputs.get('options'))}\n")
    outcome, _ = await run_cases(folder, json.dumps({"id": "s", **start, "simulator": {
        "use": "scripts:seen:simulate", "options": {"connector": "terse", "mode": "chat"}}}))
    result = json.loads((outcome.run_dir / str(outcome.records[0].result)).read_text())
    notes = [e["data"] for e in result["events"] if e["name"] == "user_side"]
    assert notes[-1]["simulator_reasoning"] == "{'connector': 'terse', 'mode': 'chat'}"


def test_a_simulators_connector_naming_no_model_is_refused_where_it_is_written(tmp_path: Path) -> None:
    text = json.dumps({"id": "a", "input": "hi", "simulator": {"options": {"connector": "nope"}}})
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(Resolver(models={"simulator"})))
    assert [str(p) for p in caught.value.problems] == [
        "cases.jsonl:1:67: simulator.options.connector: no model named 'nope' under models: (models: simulator)"]


def test_the_simulators_max_turns_setting_is_a_number_of_turns(tmp_path: Path) -> None:
    # before: "10", 10.5, 0 or true were left for the default of 20 turns without a word
    cases = [{"id": f"c{n}", "input": "hi", "simulator": {"metadata": {"max_turns": value}}}
             for n, value in enumerate(["10", 10.5, 0, True])]
    cases.append({"id": "o", "input": "hi", "simulator": {"options": {"metadata": {"max_turns": 2000}}}})
    resolver = Resolver(models={"simulator"})
    with pytest.raises(ConfigError) as caught:
        parse_text("\n".join(map(json.dumps, cases)), "cases.jsonl", tmp_path, ParseSettings(resolver))
    assert [(p.line, p.path, p.message) for p in caught.value.problems] == [
        (1, "simulator.metadata.max_turns", 'max_turns is a number of turns from 1 to 1000, not "10"'),
        (2, "simulator.metadata.max_turns", "max_turns is a number of turns from 1 to 1000, not 10.5"),
        (3, "simulator.metadata.max_turns", "max_turns is a number of turns from 1 to 1000, not 0"),
        (4, "simulator.metadata.max_turns", "max_turns is a number of turns from 1 to 1000, not true"),
        (5, "simulator.options.metadata.max_turns", "max_turns is a number of turns from 1 to 1000, not 2000")]
    (good,) = parse_text(json.dumps({**cases[0], "simulator": {"metadata": {"max_turns": 3}}}), "cases.jsonl",
                         tmp_path, ParseSettings(resolver))
    assert good.case.turn_limit() == 3


async def test_the_turns_a_case_writes_are_all_said(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # before: 22 written turns failed at the 20th, 'max turns (20) exceeded'; max_turns 2 beside 3 written turns
    # loaded, and failed every run the same way
    folder = project(tmp_path, expense_agent.url)
    long = json.dumps({"id": "long", "turns": [{"input": "Hello"}] * 22, "on_missing_input": "end"})
    outcome, _ = await run_cases(folder, long)
    (record,) = outcome.records
    assert (record.status, record.total_turns) == ("passed", 22)
    short = [{"id": "a", "max_turns": 2, "turns": [{"input": "Hello"}] * 3},
             {"id": "b", "turns": [{"input": "Hello"}] * 3, "simulator": {"metadata": {"max_turns": 2}}}]
    with pytest.raises(ConfigError) as caught:
        parse_text("\n".join(map(json.dumps, short)), "cases.jsonl", tmp_path,
                   ParseSettings(Resolver(models={"simulator"})))
    assert [(p.line, p.path, p.message) for p in caught.value.problems] == [
        (n, path, "max_turns 2 is fewer than the 3 turns written: they could never all be said")
        for n, path in ((1, "max_turns"), (2, "simulator.metadata.max_turns"))]


def test_a_generator_parameter_given_twice_is_refused(tmp_path: Path) -> None:
    # before: `?count=2&count=3` generated 3 cases, the 2 dropped without a word
    done = run_test(["-i", "agents:gen?count=2&focus=edge&count=3", "-n", "http://127.0.0.1:9"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "tamesu test: -i 'agents:gen?count=2&focus=edge&count=3' gives count more than once: give each once")


@pytest.mark.parametrize(("given", "said"), [
    ("agents:gen?=3", "gives a parameter without a name: write name=value (count=10)"),
    ("agents:gen?count=2&=x", "gives a parameter without a name: write name=value (count=10)"),
    ("agents:?count=2", "names no generator: write agents:NAME, a model under models: or a target"),
])
def test_a_generator_given_without_a_name_is_one_line_saying_so(tmp_path: Path, given: str, said: str) -> None:
    # before: "a model generator reads count, focus and complexity, not " (the name left blank), and "no model or
    # target named '' to generate test cases"
    (tmp_path / "tamesu.yaml").write_text("models:\n  gen: { provider: fake, rules: [] }\n")
    done = run_test(["-i", given, "-n", "http://127.0.0.1:9"], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, f"tamesu test: -i {given!r} {said}\n"), done.stdout
