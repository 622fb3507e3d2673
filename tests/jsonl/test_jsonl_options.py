"""The design's `options` of a JSONL case where they matter most: a connector is the model a model target answers
with (the case's, a turn's own, `-c` over both), refused where it is written when it names no model; run
in-process against fake models and through `tamesu test` as a user types it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.expense_agent import run_test
from jsonl.test_jsonl_run import project, run_cases
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.plan.targets import Resolver


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
