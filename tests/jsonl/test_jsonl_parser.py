"""JSONL test cases: modes, the mapping of the design's assertions onto the engine's checks, and every problem
as one `file:line:col: path: problem` line, all at once (exit 2 through the command)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import forked
from agents.expense_agent import run_test
from tamesu.errors import ConfigError
from tamesu.jsonl.assertions import to_engine
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.plan.targets import Resolver

RESOLVER = Resolver(models={"judge", "simulator", "validator"}, targets={"expense"})


def parse(text: str, tmp_path: Path, default_simulator: str | None = None) -> list:
    return parse_text(text, "cases.jsonl", tmp_path, ParseSettings(RESOLVER, default_simulator))


def problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, tmp_path)
    return [str(p) for p in caught.value.problems]


def test_modes_follow_the_case(tmp_path: Path) -> None:
    cases = parse("\n".join([
        '{"id": "a", "input": "Hello"}',
        '{"id": "b", "input": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},'
        ' {"role": "user", "content": "z"}]}',
        '{"id": "c", "turns": [{"input": "x"}, {"input": "y"}]}',
        '{"id": "d", "type": "multi_turn", "input": "x"}',
        '{"id": "e", "input": "x", "simulator": {"use": "simulator"}}',
        '{"id": "f", "simulator": {"use": "agents:simulator"}, "checkpoints": [{"id": "p", "assertion":'
        ' {"type": "contains", "value": "x"}}]}',
        "# a comment line, and an object spread over lines:",
        '{"id": "g",\n "input": "x"}',
    ]), tmp_path)
    assert [(c.id, c.case.mode) for c in cases] == [
        ("a", "standard"), ("b", "standard"), ("c", "multi_turn"), ("d", "multi_turn"), ("e", "multi_turn"),
        ("f", "dynamic"), ("g", "standard")]
    assert [m.role for m in cases[1].case.input] == ["user", "assistant", "user"]
    assert cases[5].simulator is not None and cases[5].simulator.name == "simulator"
    assert cases[6].line == 8


def test_problems_name_file_line_column_and_path(tmp_path: Path) -> None:
    text = "\n".join([
        '{"id": "a", "input": "hi", "assertions": [{"type": "contain", "value": "x"}]}',
        '{"id": "b", "input": "hi", "asserts": []}',
        '{"id": "c", "simulator": {"use": "simulator"}, "checkpoints": [{"id": "x", "assertion": {"type":'
        ' "contains", "value": "a"}, "after": ["nope"]}]}',
        '{"id": "d", "simulator": {"use": "simulator"}, "checkpoints": [{"id": "y", "description": "no assertion"}]}',
        '{"id": "e", "input": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}',
        '{"id": "f", "input": "hi", "assertions": [{"type": "regex", "pattern": "(unclosed"}]}',
        '{"id": "g", "input": "hi" "oops"}',
        '{"id": "h", "simulator": {"use": "simulator"}, "checkpoints": [{"id": "p", "assertion": {"type":'
        ' "contains", "value": "a"}, "after": ["q"]}, {"id": "q", "assertion": {"type": "contains", "value":'
        ' "b"}, "after": ["p"]}]}',
        '{"id": "i", "input": "hi", "assertions": [{"type": "agent", "use": "agents:nobody", "options":'
        ' {"metadata": {"criteria": "x"}}}, {"type": "agent"}]}',
        '{"id": "j", "input": "hi"}',
        '{"id": "j", "input": "again"}',
        '{"id": "k", "input": [{"role": "user", "content": [{"type": "image", "source": "file://./missing.jpg"}]}]}',
        '{"id": "l", "turns": [{"input": "x"}], "input": "y"}',
        '{"id": "m", "input": "x", "final_assertions": [{"type": "contains", "value": "x"}]}',
        '{"id": "n", "simulator": {"use": "nobody"}, "checkpoints": [{"id": "p", "assertion": {"contains": "a"}}]}',
        '{"id": "o", "input": "hi", "asertions": []}',
        '{"id": "p", "input": 42}',
    ])
    assert problems(text, tmp_path) == [
        "cases.jsonl:1:52: assertions[0].type: unknown assertion type 'contain' (did you mean 'contains'?)",
        "cases.jsonl:2:28: asserts: not a test case key (did you mean 'assert'?)",
        "cases.jsonl:3:135: checkpoints[0].after[0]: unknown checkpoint id 'nope' (ids: x)",
        "cases.jsonl:4:64: checkpoints[0].assertion: missing required key",
        "cases.jsonl:5:66: input[1].role: the last message of input is the one the agent answers: it must be "
        "from the user",
        "cases.jsonl:6:72: assertions[0].pattern: invalid regular expression '(unclosed': missing ), "
        "unterminated subpattern at position 0",
        "cases.jsonl:7:27: not valid JSON: Expecting ',' delimiter",
        "cases.jsonl:8:134: checkpoints[0].after: checkpoints wait for each other in a cycle and can never be "
        "reached: p, q",
        "cases.jsonl:9:68: assertions[0].use: no model or target named 'nobody' for the validator (models: judge, "
        "simulator, validator)",
        "cases.jsonl:9:130: assertions[1]: an agent assertion needs options.metadata.criteria",
        "cases.jsonl:11:8: id: another test case has id 'j' (line 10)",
        f"cases.jsonl:12:80: input[0].content[0].source: file not found: {tmp_path}/missing.jpg",
        "cases.jsonl:13:40: input: the first input is turns[0].input or input, not both",
        "cases.jsonl:14:27: final_assertions: final_assertions belong to multi-turn cases; a standard case has "
        "assertions",
        "cases.jsonl:15:34: simulator.use: no model or target named 'nobody' for the simulator (models: judge, "
        "simulator, validator)",
        # by the key's name too (it suggested final_assertions); input takes text, so 42 is not "not a list"
        "cases.jsonl:16:28: asertions: not a test case key (did you mean 'assertions'?)",
        "cases.jsonl:17:22: input: input is text, a message {role, content} or a list of them, got 42",
    ]


def test_a_json_array_of_cases_is_its_cases_each_where_it_is_written(tmp_path: Path) -> None:
    # a .json file of cases is most often an array: it was one problem, "a test case is a JSON object"
    cases = parse('[\n  {"id": "a", "input": "Hello"},\n  {"id": "b", "turns": [{"input": "x"}]}\n]\n', tmp_path)
    assert [(c.id, c.case.mode, c.line) for c in cases] == [("a", "standard", 2), ("b", "multi_turn", 3)]
    assert problems('[{"id": "a", "input": "hi"},\n {"id": "b", "inptu": "hi"},\n 7]', tmp_path) == [
        # each case's problems begin with its index in the array, as a suite's cases file's rows do
        "cases.jsonl:2:14: [1].inptu: not a test case key (did you mean 'input'?)",
        "cases.jsonl:3:2: [2]: a test case is a JSON object with id and input"]


def test_a_dynamic_case_takes_the_default_simulator(tmp_path: Path) -> None:
    text = '{"id": "a", "checkpoints": [{"id": "p", "assertion": {"type": "contains", "value": "x"}}]}'
    no_models = ParseSettings(Resolver(models=set()), None)
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, no_models)
    assert "no simulator: set simulator.use, pass --simulator" in str(caught.value)
    (case,) = parse(text, tmp_path, default_simulator="validator")
    assert case.simulator is not None and case.simulator.name == "validator"


def test_checkpoints_are_ordered_after_what_they_wait_for(tmp_path: Path) -> None:
    (case,) = parse('{"id": "a", "simulator": {"use": "simulator"}, "checkpoints": ['
                    '{"id": "third", "after": ["second"], "assertion": {"type": "contains", "value": "c"}},'
                    '{"id": "first", "assertion": {"type": "contains", "value": "a"}},'
                    '{"id": "second", "after": ["first"], "required": false,'
                    ' "assertion": {"type": "contains", "value": "b"}}]}', tmp_path)
    assert [c.spec.id for c in case.checkpoints] == ["first", "second", "third"]
    assert case.checkpoints[1].spec.required is False


@pytest.mark.parametrize(("raw", "key", "label"), [
    ({"type": "contains", "value": "ok"}, "contains", 'contains "ok"'),
    ({"type": "contains", "value": "ok", "negate": True}, "contains", 'not contains "ok"'),
    ({"type": "regex", "pattern": "a\\d"}, "regex", 'regex "a\\\\d"'),
    ({"type": "json_path", "path": "$.status", "value": "ok"}, "json_path", '$.status = "ok"'),
    ({"type": "json_path", "path": "$.status", "negate": True}, "json_path", "$.status is absent"),
    ({"type": "tool_called", "name": "create_expense"}, "tool_called", 'tool_called "create_expense"'),
    ({"type": "equals", "value": "OK"}, "equals", 'equals "OK"'),
    ({"type": "type", "path": "$.count", "value": "number"}, "type", "$.count is number"),
    ({"type": "agent", "use": "agents:validator", "options": {"metadata": {"criteria": "helpful"}}}, "agent",
     'agent "helpful"'),
    ({"judge": "be polite"}, "judge", 'judge "be polite"'),
])
def test_assertions_map_onto_engine_checks(raw: dict, key: str, label: str) -> None:
    assertion = to_engine(raw, RESOLVER, on_turn=2)
    assert (assertion.key, assertion.label, assertion.on_turn) == (key, label, 2)


def test_negate_uses_the_engine_siblings_where_they_exist() -> None:
    from tamesu.checks.json_path import JsonPath
    from tamesu.checks.negate import Negated
    from tamesu.checks.text import NotContains, NotRegex
    from tamesu.checks.tools import ToolNotCalled

    def check(raw: dict) -> object:
        return to_engine({**raw, "negate": True}, RESOLVER).check

    assert isinstance(check({"type": "contains", "value": "x"}), NotContains)
    assert isinstance(check({"type": "regex", "pattern": "x"}), NotRegex)
    assert isinstance(check({"type": "tool_called", "name": "x"}), ToolNotCalled)
    assert isinstance(check({"type": "json_path", "path": "$.a", "value": 1}), JsonPath)
    assert isinstance(check({"type": "equals", "value": "x"}), Negated)


def test_a_null_value_is_json_null() -> None:
    from tamesu.checks._compare import expectations

    # `"value": null` once meant "no value": json_path became `exists`, equals "needs value"
    assert expectations(to_engine({"type": "json_path", "path": "$.a", "value": None}, RESOLVER).check.spec) == {
        "equals": None}
    negated = to_engine({"type": "json_path", "path": "$.a", "value": None, "negate": True}, RESOLVER).check
    assert expectations(negated.spec) == {"not_equals": None} and negated.spec.exists is None
    assert to_engine({"type": "equals", "value": None}, RESOLVER).check.spec.value is None


def test_a_bad_or_empty_path_is_a_problem_where_written(tmp_path: Path) -> None:
    # before: an equals or type path was first compiled by the run: an internal error of every run
    said = problems('{"id": "a", "input": "hi", "assertions": [{"type": "equals", "value": 1, "path": "$$"}, '
                    '{"type": "type", "value": "number", "path": ""}, {"type": "json_path", "path": " "}]}\n',
                    tmp_path)
    empty = "an empty JSONPath: write a path such as $.status, or $ for the whole response"
    assert said == ["cases.jsonl:1:82: assertions[0].path: invalid JSONPath '$$': unexpected token '$'",
                    f"cases.jsonl:1:133: assertions[1].path: {empty}",
                    f"cases.jsonl:1:168: assertions[2].path: {empty}"]


def test_a_key_written_twice_is_a_problem_where_written(tmp_path: Path) -> None:
    # before: json kept the last one in silence (the case run was not the one written)
    said = problems('{"id": "a", "input": "hi", "input": "bye", "assertions": [{"type": "contains", "value": "x", '
                    '"value": "y"}]}\n{"id": "b", "input": "hi"}\n'
                    '[{"id": "c", "input": "hi", "options": {"metadata": {"k": 1, "k": 2}}}, {"id": "d", "id": "e"}]\n',
                    tmp_path)
    assert said == ["cases.jsonl:1:28: duplicate key 'input'",
                    "cases.jsonl:1:94: assertions[0]: duplicate key 'value'",
                    "cases.jsonl:3:62: [0].options.metadata: duplicate key 'k'",  # the array's: its case's index
                    "cases.jsonl:3:85: [1]: duplicate key 'id'"]


def test_the_command_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "a", "input": "hi", "assertions": [{"type": "contains"}]}\n'
                     '{"id": "b", "simulator": {"use": "simulator"}, "checkpoints": [{"id": "x", "assertion":'
                     ' {"type": "contains", "value": "a"}, "after": ["nope"]}]}\n')
    (tmp_path / "tamesu.yaml").write_text("models:\n  simulator: { provider: fake, rules: [] }\n"
                                          "targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    done = run_test(["-i", "cases.jsonl", "-n", "bot"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "cases.jsonl:1:43: assertions[0]: a contains assertion needs value (text, or a list of texts)",
        "cases.jsonl:2:135: checkpoints[0].after[0]: unknown checkpoint id 'nope' (ids: x)",
        "2 problems found",
    ]


def test_a_key_that_is_no_case_key_lists_the_documented_assertions(tmp_path: Path) -> None:
    # before: "(keys: ..., input, assert, options, ...)": the alias only, not the `assertions` the docs write
    [said] = problems('{"id": "K1", "input": "hello", "bogus": 1}', tmp_path)
    assert said.startswith("cases.jsonl:1:32: bogus: not a test case key (keys: "), said
    assert ", input, assertions (or assert), options, " in said, said
    [turn] = problems('{"id": "K2", "turns": [{"input": "x", "bogus": 1}]}', tmp_path)
    assert turn.endswith("turns[0].bogus: not a turns key (keys: input, assertions (or assert), options, attachments)")


def test_an_empty_input_is_refused_where_it_is_written(tamesu: Any, tmp_path: Path) -> None:
    # before: "" and "   " were sent to the agent as the user's words, and `-i ""` ran the current folder's cases
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": ""}\n{"id": "b", "input": "   "}\n'
                                          '{"id": "c", "turns": [{"input": "hi"}, {"input": "\\n"}]}\n'
                                          '{"id": "d", "input": "hi"}\n'
                                          '{"id": "e", "input": {"role": "user", "content": " "}}\n')
    (tmp_path / "tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    for args in (["test", "-i", "cases.jsonl", "-n", "bot"], ["validate", "cases.jsonl", "-n", "bot"]):
        done = tamesu(args, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines() == [
            "cases.jsonl:1:22: input: empty: write what the user says",
            "cases.jsonl:2:22: input: only spaces: write what the user says",
            "cases.jsonl:3:50: turns[1].input: only spaces: write what the user says",
            "cases.jsonl:5:22: input: a user message with no words and no file: write what the user says",
            "4 problems found"], done.stderr
    for given in ("", " "):
        done = run_test(["-i", given, "-n", "bot"], cwd=tmp_path)
        assert done.returncode == 2 and done.stderr == f"tamesu test: -i {given!r} is empty: give a JSONL file, a " \
                                                       "folder, a message, agents:... or scripts:...\n", done.stderr


def test_an_input_or_turns_written_empty_is_refused_at_its_key(tmp_path: Path) -> None:
    # before: every one of these was reported at 1:1, the start of the case, as if no input had been written
    text = "\n".join(['{"id": "a", "input": []}', '{"id": "b", "type": "multi_turn", "input": []}',
                      '{"id": "c", "turns": []}', '{"id": "d", "type": "single_turn", "input": null}',
                      '{"id": "e", "name": "nothing said"}'])
    needs = "a test case needs input (text, a message, or a message history)"
    assert problems(text, tmp_path) == [
        f"cases.jsonl:1:13: input: empty: {needs}, turns, or a simulator with checkpoints",
        "cases.jsonl:2:35: input: empty: a multi-turn case needs turns (or input to start with)",
        f"cases.jsonl:3:13: turns: empty: {needs}, turns, or a simulator with checkpoints",
        f"cases.jsonl:4:36: input: null: {needs}",
        f"cases.jsonl:5:1: {needs}, turns, or a simulator with checkpoints"]


def test_checkpoints_written_empty_are_refused_at_the_key(tmp_path: Path) -> None:
    # before: "a" and "c" loaded and ran as a multi-turn and a standard case, checking no checkpoint; "d" was
    # told at 1:1 that a multi-turn case needs turns
    text = "\n".join([
        '{"id": "a", "input": "x", "simulator": {"use": "simulator"}, "checkpoints": []}',
        '{"id": "b", "type": "dynamic", "input": "x", "simulator": {"use": "simulator"}, "checkpoints": []}',
        '{"id": "c", "input": "x", "checkpoints": []}',
        '{"id": "d", "simulator": {"use": "simulator"}, "checkpoints": []}'])
    empty = "checkpoints: empty: a dynamic case needs at least one checkpoint"
    assert problems(text, tmp_path) == [f"cases.jsonl:1:62: {empty}", f"cases.jsonl:2:81: {empty}",
                                        f"cases.jsonl:3:27: {empty}", f"cases.jsonl:4:48: {empty}"]


def test_a_bad_content_part_is_one_problem_at_the_part(tmp_path: Path) -> None:
    # before: each was also "content: input should be a valid string", and the part's own problem sat at the
    # start of content under a path of pydantic's making ("content.list[function-after[_complete(), ...]][0]")
    text = "\n".join([
        '{"id": "a", "input": [{"role": "user", "content": [{"type": "video", "source": "file://x.mp4"}]}]}',
        '{"id": "b", "input": [{"role": "user", "content": [{"type": "image"}]}]}',
        '{"id": "c", "turns": [{"input": {"role": "user", "content": [{"type": "image", "src": "x"}]}}]}',
        '{"id": "d", "input": [{"role": "user", "content": 5}]}'])
    assert problems(text, tmp_path) == [
        "cases.jsonl:1:61: input[0].content[0].type: input should be 'text', 'image', 'file' or 'audio', got 'video'",
        "cases.jsonl:2:52: input[0].content[0]: an image part needs a source such as file://./receipt.jpg",
        "cases.jsonl:3:80: turns[0].input.content[0].src: not a content key (did you mean 'source'?)",
        'cases.jsonl:4:51: input[0].content: content is text, or a list of parts such as {"type": "text", "text": '
        '"..."}, not 5']


def test_half_a_utf16_pair_is_a_problem_where_it_is_written(tmp_path: Path) -> None:
    # `"hi\udc00"` validated, then the run ended in "internal error: UnicodeEncodeError: ... surrogates not allowed"
    said = problems('{"id": "a", "input": "hi\\udc00"}\n{"id": "b", "input": "ok \\ud83d\\ude00"}', tmp_path)
    assert said == ["cases.jsonl:1:25: \\udc00 is half of a UTF-16 pair without its other half: write the character "
                    "itself"], said
    [whole] = parse('{"id": "b", "input": "ok \\ud83d\\ude00"}', tmp_path)  # a whole pair is its character
    assert "\U0001F600" in str(whole)


def test_a_timeout_of_nothing_is_refused(tmp_path: Path) -> None:
    # before: a case's "timeout": "0s" ran under the default 5m without a word (0 read as unset), an
    # interactive.timeout of 0 asked a person who could never answer, and --timeout 0s ended the command in
    # 'internal error: ValidationError'
    assert problems("\n".join([
        '{"id": "a", "input": "hi", "timeout": "0s"}',
        '{"id": "b", "turns": [{"input": "hi"}], "interactive": {"enabled": true, "timeout": 0}}']), tmp_path) == [
        "cases.jsonl:1:39: timeout: input should be greater than 0, got '0s'",
        "cases.jsonl:2:85: interactive.timeout: input should be greater than 0, got 0.0"]
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    done = run_test(["-i", str(tmp_path / "cases.jsonl"), "-n", "http://127.0.0.1:9", "--timeout", "0s"],
                    cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--timeout': a timeout is more than 0s, got '0s'"), done.stderr


def test_a_key_an_assertion_type_never_reads_is_refused_where_written(tmp_path: Path) -> None:
    # before: each was accepted and did nothing: contains looked in the whole reply, not at path; the regex was
    # pattern, value unread; equals compared case and all; tool_called's value lost to name
    line = ('{"id": "a", "input": "hi", "assertions": [{"type": "contains", "value": "submitted", "path": "$.s"}, '
            '{"type": "regex", "pattern": "a", "value": "b"}, {"type": "equals", "value": "x", "ignore_case": true}, '
            '{"type": "tool_called", "name": "create", "value": "submit"}, {"type": "json_path", "path": "$.a", '
            '"args": {}}, {"type": "agent", "value": "x", "options": {"metadata": {"criteria": "kind"}}}]}')
    assert problems(line, tmp_path) == [
        "cases.jsonl:1:86: assertions[0].path: not a key of a contains assertion, which reads value, ignore_case "
        "(and negate)",
        "cases.jsonl:1:136: assertions[1].value: pattern or value, not both (value is the short way to write pattern)",
        "cases.jsonl:1:184: assertions[2].ignore_case: not a key of an equals assertion, which reads value, path "
        "(and negate)",
        "cases.jsonl:1:248: assertions[3].value: name or value, not both (value is the short way to write name)",
        "cases.jsonl:1:305: assertions[4].args: not a key of a json_path assertion, which reads path, value "
        "(and negate)",
        "cases.jsonl:1:336: assertions[5].value: not a key of an agent assertion, which reads use, options "
        "(and negate)"]


def test_a_turns_input_from_anyone_but_the_user_is_refused(tmp_path: Path) -> None:
    # before: sent to the agent as the user's words, the role dropped without a word
    line = ('{"id": "a", "turns": [{"input": "Hi"}, {"input": {"role": "assistant", "content": "What type?"}}, '
            '{"input": {"role": "system", "content": "Be brief"}}]}')
    assert problems(line, tmp_path) == [
        f"cases.jsonl:1:{col}: turns[{n}].input.role: a turn's input is what the user says: its role is user (the "
        "agent's words belong in a message history, input [...])" for n, col in ((1, 59), (2, 118))]


def test_the_earlier_revisions_keys_on_a_standard_case_are_refused(tmp_path: Path) -> None:
    # before: a standard case is one call, never awaited: these were accepted and did nothing
    line = '{"id": "a", "input": "hi", "on_missing_input": "fail", "interactive": {"enabled": true}}'
    assert problems(line, tmp_path) == [
        f"cases.jsonl:1:{col}: {key}: {key} belongs to multi-turn cases: a standard case is one call, its answer "
        'never awaited ("type": "multi_turn" plays it on)'
        for key, col in (("interactive", 56), ("on_missing_input", 28))]
    assert [c.case.mode for c in parse(line.replace('"input"', '"type": "multi_turn", "input"'), tmp_path)] == [
        "multi_turn"]


def test_dry_run_counts_one_turn_and_one_checkpoint_in_the_singular(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "a", "turns": [{"input": "hi"}]}\n'
                     '{"id": "b", "turns": [{"input": "hi"}, {"input": "x"}]}\n'
                     '{"id": "c", "simulator": {"use": "agents:simulator"}, "checkpoints": [{"id": "p", "assertion": '
                     '{"type": "contains", "value": "x"}}]}\n')
    (tmp_path / "tamesu.yaml").write_text("models:\n  simulator: { provider: fake, rules: [] }\n")
    done = run_test(["-i", str(cases), "-n", "http://127.0.0.1:9", "--dry-run"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["  [a]: multi_turn, 1 turn, 0 assertion(s)",
                                             "  [b]: multi_turn, 2 turns, 0 assertion(s)",
                                             "  [c]: dynamic, 1 checkpoint, 0 assertion(s)"]


def test_assert_and_assertions_both_written_are_one_key_written_twice(tmp_path: Path) -> None:
    # before: "assertions: not a test case key (did you mean 'assertions'?)", the key it had just refused
    said = problems('{"id": "A", "input": "hi", "assert": [], "assertions": [{"type": "contains", "value": "x"}]}\n'
                    '{"id": "B", "turns": [{"input": "x", "assert": [], "assertions": []}]}', tmp_path)
    assert said == ["cases.jsonl:1:42: assertions: assertions and assert are the same key: write one",
                    "cases.jsonl:2:52: turns[0].assertions: assertions and assert are the same key: write one"]


def test_a_simulators_connector_names_a_model(tmp_path: Path) -> None:
    # before: accepted and never used, whatever it named (an agent simulator gets it as its own to read)
    (tmp_path / "sims.py").write_text("def chatty(inputs):\n    return 'more'\n")
    sim = '{"id": "%s", "input": "hi", "simulator": {"use": "%s", "options": {"connector": "%s"}}}'
    text = "\n".join([sim % ("a", "simulator", "nobody"), sim % ("b", "scripts:sims:chatty", "judge"),
                      sim % ("c", "simulator", "validator")])
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(Resolver(models=RESOLVER.models, search=[tmp_path])))
    said = [str(p) for p in caught.value.problems]
    # a script simulator is given its options as written (inputs["options"]): its connector is its own to read
    assert said == [
        "cases.jsonl:1:87: simulator.options.connector: no model named 'nobody' under models: (models: judge, "
        "simulator, validator)"]


def test_options_a_helper_is_never_given_are_warned_where_written(tmp_path: Path) -> None:
    # before: accepted in silence; a validator, simulator or script gets only the connector and the metadata
    settings = ParseSettings(RESOLVER)
    text = ('{"id": "a", "input": "hi", "assertions": [{"type": "agent", "options": {"mode": "strict", "metadata": '
            '{"criteria": "x"}}}, {"type": "contains", "value": "hi"}]}\n'
            '{"id": "b", "simulator": {"use": "simulator", "options": {"search": {"q": 1}, "skip": {"history": '
            'false}, "connector": "validator"}}, "checkpoints": [{"id": "p", "assertion": {"type": "agent", '
            '"options": {"connector": "validator", "metadata": {"criteria": "y"}}}}]}\n')
    parse_text(text, "cases.jsonl", tmp_path, settings)
    assert [str(w) for w in settings.warnings] == [
        "cases.jsonl:1:72: assertions[0].options: an agent assertion is given only options.connector and "
        "options.metadata: options.mode is dropped",
        "cases.jsonl:2:58: simulator.options: a simulator is given only options.connector and options.metadata: "
        "options.skip, options.search are dropped"]


def test_what_pydantic_says_it_got_is_not_said_twice(tmp_path: Path) -> None:
    # before: "got a number with a fractional part, got 10.5"
    assert problems('{"id": "c", "input": "hi", "max_turns": 10.5}', tmp_path) == [
        "cases.jsonl:1:41: max_turns: input should be a valid integer, got a number with a fractional part (10.5)"]


def test_what_only_several_turns_read_is_refused_on_a_standard_case(tmp_path: Path) -> None:
    # before: accepted and never read (the case is one call)
    said = problems('{"id": "a", "input": "hi", "max_turns": 3}\n'
                    '{"id": "b", "type": "single_turn", "input": "hi", "on_missing_input": "fail", '
                    '"interactive": {"enabled": true}}\n'
                    '{"id": "c", "input": "hi", "simulator": {"use": "simulator"}, "max_turns": 3}', tmp_path)
    assert said[0] == ("cases.jsonl:1:28: max_turns: a standard case is one call: max_turns is for cases of "
                       "several turns")
    assert [line.split(": ")[1] for line in said[1:]] == ["interactive", "on_missing_input"], said


def test_what_only_a_multi_turn_case_reads_is_refused_on_a_dynamic_case(tmp_path: Path) -> None:
    # before: accepted and never read (the simulator gives every input of a dynamic case: nobody is asked, no
    # input is ever missing)
    point = '"checkpoints": [{"id": "p", "assertion": {"type": "contains", "value": "x"}}]'
    said = problems(f'{{"id": "a", "simulator": {{"use": "simulator"}}, {point}, "on_missing_input": "fail"}}\n'
                    f'{{"id": "b", "simulator": {{"use": "simulator"}}, {point}, "interactive": {{"enabled": true}}}}',
                    tmp_path)
    why = "belongs to multi-turn cases: a dynamic case's simulator gives every input until its checkpoints are reached"
    assert said == [f"cases.jsonl:1:127: on_missing_input: on_missing_input {why}",
                    f"cases.jsonl:2:127: interactive: interactive {why}"]


def test_an_empty_simulator_use_is_refused(tmp_path: Path) -> None:
    # before: "use": "" fell back to models.simulator in silence
    assert problems('{"id": "a", "input": "hi", "simulator": {"use": ""}}', tmp_path) == [
        "cases.jsonl:1:49: simulator.use: string should have at least 1 character, got ''"]


def test_a_simulator_flag_that_names_nothing_is_one_line_even_when_no_case_uses_it(tmp_path: Path) -> None:
    # before: ignored when every case named its own; else one problem per case, at no key of the case
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi"}\n{"id": "b", "input": "hi"}\n')
    (tmp_path / "tamesu.yaml").write_text("models:\n  simulator: { provider: fake, rules: [] }\n"
                                          "targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    done = run_test(["-i", "cases.jsonl", "-n", "bot", "--simulator", "nobody"], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "tamesu test: --simulator nobody: no model or target named 'nobody' "
                                                 "for the simulator (models: simulator; targets: bot)\n")


def test_a_model_targets_connector_names_a_model_when_the_case_loads(tmp_path: Path) -> None:
    # before: every case was an error when it ran (exit 3): "model target bot (nosuch): no model named 'nosuch'"
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi", "options": {"connector": "nosuch"}}\n'
                                          '{"id": "b", "turns": [{"input": "hi", "options": {"connector": "x"}}]}\n')
    (tmp_path / "tamesu.yaml").write_text("models:\n  m: { provider: fake, rules: [{ say: hi }] }\n"
                                          "targets:\n  bot: { type: model, model: m }\n")
    done = run_test(["-i", "cases.jsonl", "-n", "bot"], cwd=tmp_path)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        "cases.jsonl:1:53: options.connector: no model named 'nosuch' under models: (models: m)",
        "cases.jsonl:2:64: turns[0].options.connector: no model named 'x' under models: (models: m)",
        "2 problems found"]), done.stderr
    done = run_test(["-i", "hello", "-n", "bot", "-c", "nosuch"], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "tamesu test: -c nosuch: no model named 'nosuch' under models: "
                                                 "(models: m)\n")


def test_a_provider_model_of_no_known_provider_is_refused_where_written(tmp_path: Path) -> None:
    # before: validate said ok, and every case that asked the model was an error when it ran (exit 3):
    # "model 'scripts:x.y': Value error, unknown model provider 'scripts'"
    (tmp_path / "cases.jsonl").write_text(
        '{"id": "a", "input": "hi", "options": {"connector": "foo:bar"}}\n'
        '{"id": "b", "input": "hi", "simulator": {"use": "foo:bar"}}\n'
        '{"id": "c", "input": "hi", "assertions": [{"type": "agent", "use": "scripts:checks.tone", "options": '
        '{"metadata": {"criteria": "polite"}}}]}\n'
        '{"id": "d", "input": "hi", "options": {"connector": "fake:x"}}\n')
    (tmp_path / "tamesu.yaml").write_text("models:\n  m: { provider: fake, rules: [{ say: hi }] }\n"
                                          "targets:\n  bot: { type: model, model: m }\n")
    unknown = "unknown model provider '{}' (one of anthropic, azure, fake, openai)"
    done = run_test(["-i", "cases.jsonl", "-n", "bot"], cwd=tmp_path)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"cases.jsonl:1:53: options.connector: 'foo:bar' is no model: {unknown.format('foo')}",
        f"cases.jsonl:2:49: simulator.use: 'foo:bar' is no model: {unknown.format('foo')}",
        f"cases.jsonl:3:68: assertions[0].use: 'scripts:checks.tone' is no model: {unknown.format('scripts')}",
        "3 problems found"]), done.stderr
    for flag in ("-c", "--simulator"):
        done = run_test(["-i", "hello", "-n", "bot", flag, "foo:bar"], cwd=tmp_path)
        assert (done.returncode, done.stderr) == (2, f"tamesu test: {flag} foo:bar: 'foo:bar' is no model: "
                                                     f"{unknown.format('foo')}\n")


def test_no_tamesu_yaml_found_is_said_so_not_that_it_has_no_targets(tmp_path: Path) -> None:
    # before: "-n bot: no target named 'bot' (targets: tamesu.yaml has no targets: section)", with the project's
    # tamesu.yaml (and its targets) in the working directory: the project is looked for from the cases' folder
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: http://127.0.0.1:9 }\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "cases.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    urls = "http(s):// for a rest or A2A agent, grpc(s):// for one with tamesu's turn API"
    cases = str(tmp_path / "elsewhere" / "cases.jsonl")
    for command, args in (("test", ["-i", cases]), ("validate", [cases])):
        done = forked.run([command, *args, "-n", "bot"], tmp_path / "project", {**os.environ, "NO_COLOR": "1"}, 60,
                          subprocess.DEVNULL)
        assert (done.returncode, done.stderr) == (2, f"tamesu {command}: -n bot: no target named 'bot': no tamesu.yaml "
                                                     f"in {tmp_path / 'elsewhere'} or a folder above it (up to the git "
                                                     f"repository's root); or give a URL ({urls})\n"), done.stdout


def test_an_assertion_that_could_never_fail_or_names_nothing_is_refused(tmp_path: Path) -> None:
    # before: "use": "" was the default judge in silence, and an empty pattern passed every answer
    said = problems('{"id": "a", "input": "hi", "assertions": [{"type": "agent", "use": "", "options": {"metadata": '
                    '{"criteria": "x"}}}, {"type": "regex", "pattern": ""}, {"type": "regex", "value": ""}]}', tmp_path)
    assert said == ["cases.jsonl:1:68: assertions[0].use: string should have at least 1 character",
                    "cases.jsonl:1:117: assertions[1]: an empty pattern matches every answer: write what it should "
                    "match",
                    "cases.jsonl:1:151: assertions[2]: an empty pattern matches every answer: write what it should "
                    "match"]


def test_a_value_where_a_mapping_belongs_names_no_python_class(tmp_path: Path) -> None:
    # before: "input should be a valid dictionary or instance of SimulatorSpec, got 'simulator'"
    assert problems('{"id": "a", "input": "hi", "simulator": "simulator"}', tmp_path) == [
        "cases.jsonl:1:41: simulator: expected a mapping of keys, got 'simulator'"]


def test_a_turns_assertion_that_reads_the_whole_run_is_refused(tmp_path: Path) -> None:
    # a turn's `{"metric": ...}` was scoped to the turn and graded the whole run's metric (a suite's `on_turn` on
    # one is refused too: tests/checks/test_on_turn_whole_run.py); in final_assertions it is the run's
    case = {"id": "a", "turns": [{"input": "hi", "assertions": [{"metric": {"name": "turns", "lte": 3}}]},
                                 {"input": "bye"}],
            "final_assertions": [{"metric": {"name": "turns", "lte": 3}}, {"captured": "eta"}]}
    said = problems(json.dumps(case), tmp_path)
    assert len(said) == 1 and said[0].endswith(
        "turns[0].assertions[0].metric: metric reads the run's metrics, which one turn cannot narrow: grade it on "
        "the whole conversation (a case's final_assertions)"), said
    case["turns"][0]["assertions"] = [{"contains": "hello"}]
    assert parse(json.dumps(case), tmp_path)
