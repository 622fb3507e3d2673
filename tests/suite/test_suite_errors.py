"""Every class of mistake in a suite: one exact `file:line:col: path: problem` line each, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

TARGET = """\
targets:
  api:
    type: rest
    url: http://127.0.0.1:9/chat
"""


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


CASES = [
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ {say: hi} ]\n",
        "suite.yaml:9:1: YAML syntax error: expected ',' or '}', but got '<stream end>' (a '{' or '[' opened at "
        "line 8, column 15 is never closed)",
        id="syntax-error",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ {say: hi} ]\n  - name: b\n",
        "suite.yaml:9:3: YAML syntax error: expected ',' or '}', but got '-' (a '{' opened at line 8, column 15 is "
        "not closed before this)",
        id="syntax-unclosed-brace-before-more",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    tags: [a, b\n    target: api\n",
        "suite.yaml:8:11: YAML syntax error: expected ',' or ']', but got ':' (a '[' opened at line 7, column 11 is "
        "not closed before this)",
        id="syntax-unclosed-bracket-before-more",
    ),
    pytest.param(
        "targets:\n\tapi: { type: rest, url: http://127.0.0.1:9/chat }\n",
        "suite.yaml:2:1: YAML syntax error: found character '\\t' that cannot start any token (a tab: YAML indents "
        "with spaces)",
        id="syntax-tab",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario:\n      script:\n        - say: Note: hi\n",
        "suite.yaml:10:20: YAML syntax error: mapping values are not allowed here (quote a value that holds ': ', "
        "or check this line's indentation)",
        id="syntax-colon-in-a-value",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n   target: api\n",
        "suite.yaml:7:4: YAML syntax error: expected <block end>, but found '<block mapping start>' (this line's "
        "indentation does not match the lines above it)",
        id="syntax-indentation",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    description: \"open\n",
        "suite.yaml:8:1: YAML syntax error: found unexpected end of stream (a quote opened at line 7, column 18 is "
        "never closed)",
        id="syntax-open-quote",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    persona:\n      colour: red\n",
        "suite.yaml:9:7: tests[0].persona.colour: not a persona key (keys: name, style, language, voice, "
        "background, behaviors, facts)",
        id="unknown-key",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ { say: 1.10 } ] }\n",
        "suite.yaml:8:34: tests[0].scenario.script[0].say: input should be a valid string, got 1.1 (read as a "
        "number: put it in quotes to keep it as written)",
        id="a-number-for-text",
    ),
    pytest.param(  # before: "got True", "got None": Python's spelling of what the YAML says `true`, `null`
        TARGET + "tests:\n  - name: a\n    target: api\n    repeat: null\n"
                 "    scenario: { script: [ { say: true } ] }\n",
        "suite.yaml:8:13: tests[0].repeat: input should be a valid integer, got null\n"
        "suite.yaml:9:34: tests[0].scenario.script[0].say: input should be a valid string, got true (read as a "
        "boolean: put it in quotes to keep it as written)",
        id="yaml-spellings",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario:\n      max_turns: lots\n",
        "suite.yaml:9:18: tests[0].scenario.max_turns: expected a whole number, got 'lots'",
        id="wrong-type",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: web\n    scenario: { script: [ {say: hi} ] }\n",
        "suite.yaml:7:13: tests[0].target: no target named 'web' (targets: api)",
        id="missing-target",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario:\n      script:\n"
        "        - say: \"{{vars.city}}\"\n",
        "suite.yaml:10:16: tests[0].scenario.script[0].say: bad template {{vars.city}}: no var 'city' in the "
        "test, its cases, the suite or the project",
        id="bad-template-var",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    assert:\n      - contains: \"{{vars.x\"\n"
        "    scenario: { script: [ {say: hi} ] }\n",
        "suite.yaml:9:19: tests[0].assert[0].contains: bad template: '{{' without a matching '}}'",
        id="bad-template-unclosed",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    assert:\n      - contains: \"{{weather.today}}\"\n"
        "    scenario: { script: [ {say: hi} ] }\n",
        "suite.yaml:9:19: tests[0].assert[0].contains: bad template {{weather.today}}: unknown namespace "
        "'weather' (one of args, attachments, captured, env, listen, message, messages, remote, response, run, "
        "secrets, session, trace, ui_messages, vars)",
        id="bad-template-namespace",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    target: api\n",
        "suite.yaml:8:5: duplicate key 'target'",
        id="duplicate-key",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    cases_file: missing.csv\n",
        "suite.yaml:8:17: tests[0].cases_file: cases file not found: missing.csv",
        id="cases-file-missing",
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    assert:\n      - jsonpath: { path: $.x }\n"
        "    scenario: { script: [ {say: hi} ] }\n",
        "suite.yaml:9:9: tests[0].assert[0].jsonpath: unknown assertion 'jsonpath' (did you mean 'json_path'?)",
        id="unknown-assertion",
    ),
    pytest.param(
        "targets:\n  api:\n    type: rest\n    uri: http://x\ntests: []\n",
        "suite.yaml:3:5: targets.api.url: missing required key\n"
        "suite.yaml:4:5: targets.api.uri: not a rest target key (did you mean 'url'?)",
        id="unknown-target-key",
    ),
    pytest.param(  # before: accepted; the SIP client dropped the digits, Twilio's got "X"
        TARGET + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ { say: hi, dtmf: \"2X\" } ] }\n",
        "suite.yaml:8:44: tests[0].scenario.script[0].dtmf: dtmf holds keypad keys only (0-9, *, #, A-D), not 'X'",
        id="dtmf-not-a-key",
    ),
    pytest.param(  # before: "not an other key", after the name the user gave the model
        "targets: {}\nmodels:\n  other: { provider: fake, temprature: 0.2 }\ntests: []\n",
        "suite.yaml:3:28: models.other.temprature: not a model key (did you mean 'temperature'?)",
        id="a-named-models-key",
    ),
    pytest.param(
        "targets:\n  line:\n    type: voice\n    url: ws://127.0.0.1:9/x\n    audio: { encodng: pcm16 }\n"
        "tests: []\n",
        "suite.yaml:5:14: targets.line.audio.encodng: not an audio key (did you mean 'encoding'?)",
        id="an-audio-key",
    ),
    pytest.param(
        "targets:\n  api:\n    type: 5\ntests: []\n",
        "suite.yaml:3:11: targets.api.type: type must be one word naming a target type (one of a2a, browser, "
        "grpc, livekit, mcp, model, pipecat, realtime, rest, sip, twilio, voice), not an int",
        id="not-an-int",
    ),
    pytest.param(
        "targets:\n  api:\n    type: carrier-pigeon\ntests: []\n",
        "suite.yaml:3:11: targets.api.type: unknown target type 'carrier-pigeon' (one of a2a, browser, grpc, "
        "livekit, mcp, model, pipecat, realtime, rest, sip, twilio, voice)",
        id="unknown-target-type",
    ),
    pytest.param(
        "targets:\n  api: { type: rest, url: 'https://agent.example.com:99999/chat' }\ntests: []\n",
        "suite.yaml:2:27: targets.api.url: the port is not a number from 1 to 65535",
        id="port-out-of-range",  # was an internal error in every test of the run
    ),
    pytest.param(
        "targets:\n  shop: { type: a2a, url: 'http:///a2a' }\ntests: []\n",
        "suite.yaml:2:27: targets.shop.url: no host after the scheme",
        id="no-host",
    ),
    pytest.param(
        "targets:\n  page: { type: browser, url: '/plain' }\ntests: []\n",
        "suite.yaml:2:31: targets.page.url: no scheme: write where it is, from http://, https://, ws:// or the "
        "like (a path alone names no server)",
        id="no-scheme",  # validate said ok; the run was exit 3, "Cannot navigate to invalid URL"
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    quarantine: { until: 2026-01-01 }\n",
        "suite.yaml:8:17: tests[0].quarantine.reason: missing required key",
        id="quarantine-without-reason",
    ),
    pytest.param(
        "targets:\n  r: { type: rest, url: 'http://127.0.0.1:9/', response: { final: { path: 5 } } }\ntests: []\n",
        "suite.yaml:2:67: targets.r.response.final: path: input should be a valid string, got 5",
        id="condition-path-not-text",  # was "path: Input should be a valid string", pydantic's words as they came
    ),
    pytest.param(
        TARGET + "tests:\n  - name: a\n    target: api\n    capture: [ { name: eta, json_path: '$[' } ]\n",
        "suite.yaml:8:40: tests[0].capture[0].json_path: bad JSONPath '$[': unexpected end of query",
        id="capture-json-path",  # validate said ok; every run was exit 3, "internal error: JSONPathSyntaxError"
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_one_clear_line_per_problem(tmp_path: Path, tamesu, text: str, expected: str) -> None:
    write(tmp_path, text)
    for command in ("validate", "run"):
        result = tamesu([command, "suite.yaml"], cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        # its warnings (an empty suite, a secret not set) come first: said with the problems
        said = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
        assert said[: expected.count("\n") + 1] == expected.splitlines()
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("cases.csv", "order,expect\n1,a\n", "cases.csv needs a header row with a name column (its first row: "
         "'order,expect')"),
        ("cases.json", "{\"name\": \"a\"}", "cases.json must be a JSON array of objects"),
        # a row's problem is said where it is written in the cases file (it was at the suite's cases_file key)
        ("cases.json", "[{\"name\": \"a\",}]", "=cases.json:1:15: not valid JSON: Expecting property name "
         "enclosed in double quotes"),
        ("cases.csv", "name,order\n,1\n", "=cases.csv:2:1: name: row 2 has no name"),
        # a key written twice: json kept the last in silence
        ("cases.json", '[{"name": "a", "vars": {"q": 1, "q": 2}}]', "=cases.json:1:33: [0].vars.q: duplicate key 'q'"),
        ("cases.csv", "name,price\na,1\nb,12,50\n", "=cases.csv:3:6: row 3 has more fields than its header (2): "
         "quote a value that holds ','"),
        # a row cut short sent `None` for its missing value; a field past csv's limit was "internal error"
        ("cases.csv", "name,price\na,1\nb\n", "=cases.csv:3:2: row 3 has fewer fields than its header (2): price "
         "missing"),
        ("cases.csv", "name,x\none," + "y" * 200_000 + "\n", "=cases.csv:2:1: cannot read the CSV: field larger "
         "than field limit (131072)"),
        # half a UTF-16 pair: validate said ok, the run ended in "internal error: PydanticSerializationError"
        ("cases.json", '[{"name": "a", "vars": {"x": "\\udc00"}}]', "cases.json holds half of a UTF-16 pair without "
         "its other half (a \\udXXX escape): write the character itself"),
        # a spreadsheet that lost its rows: the test ran once, with no case, and validate said ok
        ("cases.csv", "name,order\r\n", "cases.csv has no cases: a header row and no rows below it"),
        ("cases.json", "[]", "cases.json has no cases: an empty array"),
    ],
    ids=lambda value: value[:40],  # one content is 200,000 characters: it was the test's id, and its FAILED line
)
def test_bad_cases_file(tmp_path: Path, tamesu, name: str, content: str, expected: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    # a user side of its own: the other rows are checked on, and a test with none was one more problem
    write(tmp_path, TARGET + f"tests:\n  - name: a\n    target: api\n    cases_file: {name}\n"
                             "    scenario: { script: [ { say: hi } ] }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    said = expected[1:] if expected.startswith("=") else f"suite.yaml:8:17: tests[0].cases_file: {expected}"
    assert result.stderr.splitlines() == [said, "1 problem found"], result.stderr


def test_an_empty_cases_list_is_a_problem_where_written(tmp_path: Path, tamesu) -> None:
    write(tmp_path, TARGET + "tests:\n  - name: a\n    target: api\n    cases: []\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == ("suite.yaml:8:12: tests[0].cases: cases is empty: the test would run "
                                             "once with no case; write a case, or leave cases out")


@pytest.mark.parametrize("delimiter", [",", ";", "\t"], ids=["comma", "semicolon", "tab"])
def test_a_spreadsheets_cases_file_is_read_whatever_its_delimiter(tmp_path: Path, tamesu, delimiter: str) -> None:
    # Excel saves `;` where the comma is the decimal mark (and a byte-order mark and CRLF): it was "needs a header
    # row with a name column"
    price = '"12,50"' if delimiter == "," else "12,50"
    rows = [["name", "question", "price"], ["refund", "Where is my refund?", price], ["hours", "Open?", "0"]]
    text = "\r\n".join(delimiter.join(row) for row in rows) + "\r\n"
    (tmp_path / "cases.csv").write_text(("\ufeff" if delimiter == ";" else "") + text, encoding="utf-8")
    write(tmp_path, TARGET + "tests:\n  - name: faq\n    target: api\n    cases_file: cases.csv\n"
                             "    scenario: { script: [ { say: '{{vars.question}} {{vars.price}}' } ] }\n")
    result = tamesu(["list", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [line.split("  ")[0] for line in result.stdout.splitlines()] == ["suite/faq [refund]", "suite/faq [hours]"]


def test_every_problem_at_once(tmp_path: Path, tamesu) -> None:
    write(tmp_path, TARGET + (
        "tests:\n"
        "  - name: a\n    target: api\n    persona: { colour: red }\n"
        "    assert:\n      - contians: x\n"
        "  - name: b\n    target: nowhere\n    repeat: 0\n"
    ))
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines == [
        "suite.yaml:8:16: tests[0].persona.colour: not a persona key (keys: name, style, language, voice, "
        "background, behaviors, facts)",
        "suite.yaml:10:9: tests[0].assert[0].contians: unknown assertion 'contians' (did you mean 'contains'?)",
        "suite.yaml:12:13: tests[1].target: no target named 'nowhere' (targets: api)",
        "suite.yaml:13:13: tests[1].repeat: input should be greater than or equal to 1, got 0",
        "4 problems found",
    ]


def test_missing_secret_is_an_error_to_run_and_a_warning_to_validate(tmp_path: Path, tamesu) -> None:
    write(tmp_path, TARGET.replace("url: http://127.0.0.1:9/chat",
                                   "url: http://127.0.0.1:9/chat\n    headers: { Authorization: \"Bearer "
                                   "{{secrets.TAMESU_TEST_NOPE}}\" }")
          + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ {say: hi} ] }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert checked.returncode == 0
    assert ("warning: suite.yaml:5:31: targets.api.headers.Authorization: secret TAMESU_TEST_NOPE is not set "
            "(environment or .env)") in checked.stderr
    ran = tamesu(["run", "suite.yaml"], cwd=tmp_path)
    assert ran.returncode == 2
    assert "secret TAMESU_TEST_NOPE is not set" in ran.stderr.splitlines()[0]


def test_warnings_for_foreign_keys_and_expired_quarantine(tmp_path: Path, tamesu) -> None:
    write(tmp_path, TARGET + "    skill: trip-planning\n" + (
        "tests:\n  - name: a\n    target: api\n"
        "    quarantine: { reason: SUP-1, until: 2020-01-31 }\n"
        "    scenario: { script: [ {say: hi} ] }\n"
    ))
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning: suite.yaml:5:5: targets.api.skill: 'skill' is a key of a2a targets, not rest; ignored" \
        in result.stderr
    assert ("warning: suite.yaml:9:41: tests[0].quarantine.until: quarantine expired on 2020-01-31; the test "
            "counts again") in result.stderr


def test_a_test_needs_something_to_play_the_user(tmp_path: Path, tamesu) -> None:
    write(tmp_path, TARGET + "tests:\n  - name: a\n    target: api\n    persona: { name: Marta }\n"
                             "    scenario: { goal: Get a refund }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        "suite.yaml:9:15: tests[0].scenario: nothing plays the user: add scenario.script steps, or set "
        "models.simulator so the persona can speak")


def test_a_stop_when_nothing_judges_is_refused_where_written(tmp_path: Path, tamesu) -> None:
    # before: valid, and the script said its steps and ended with script_done: the condition was never looked at
    write(tmp_path, TARGET + "tests:\n  - name: a\n    target: api\n"
                             "    scenario: { script: [ {say: x} ], stop_when: the agent gives a refund }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:8:50: tests[0].scenario.stop_when: nothing would judge stop_when: the simulated user does, and it "
        "plays only with scenario.goal, a persona or scenario.attack and models.simulator (a script alone ends after "
        "its steps)", "1 problem found"]


def test_a_url_made_from_templates_that_cannot_be_sent_to_is_one_line(tmp_path: Path, tamesu) -> None:
    # whole only at run time: it was `internal error: ValueError: Port out of range 0-65535`
    write(tmp_path, "targets:\n  api: { type: rest, url: '{{env.AGENT_URL}}/chat' }\n"
                    "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                    env={"AGENT_URL": "http://127.0.0.1:99999", "NO_COLOR": "1"})
    # then `! rest target api: ...` on each test, exit 3: now the plan's, where the url is written (below)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[0] == ("suite.yaml:2:27: targets.api.url: {{env.AGENT_URL}} made it "
                                             "'http://127.0.0.1:99999/chat': the port is not a number from 1 to 65535")
    assert "internal error" not in result.stdout + result.stderr


def test_a_missing_secret_names_the_env_files_the_project_reads(tmp_path: Path, tamesu) -> None:
    # a project whose secrets come from its own files: the line names them, not a `.env` it never reads
    (tmp_path / "tamesu.yaml").write_text("suites: [suite.yaml]\nsecrets: { env_files: [config/test.env] }\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config/test.env").write_text("OTHER=1\n")
    write(tmp_path, TARGET.replace("url: http://127.0.0.1:9/chat",
                                   "url: http://127.0.0.1:9/chat\n    headers: { Authorization: \"Bearer "
                                   "{{secrets.TAMESU_TEST_NOPE}}\" }")
          + "tests:\n  - name: a\n    target: api\n    scenario: { script: [ {say: hi} ] }\n")
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert ("targets.api.headers.Authorization: secret TAMESU_TEST_NOPE is not set "
            "(environment or config/test.env)") in checked.stderr, checked.stderr
    (tmp_path / "tamesu.yaml").write_text("suites: [suite.yaml]\nsecrets: { env_files: [] }\n")
    ran = tamesu(["run"], cwd=tmp_path)
    assert ran.returncode == 2
    assert "secret TAMESU_TEST_NOPE is not set (environment)" in ran.stderr.splitlines()[0], ran.stderr


def test_a_models_unset_key_is_a_warning_where_it_is_written(tmp_path: Path, tamesu) -> None:
    # before: validate said ok, and every test that called the judge was an error at run time (exit 3)
    (tmp_path / "tamesu.yaml").write_text(
        "suites: [suite.yaml]\nmodels:\n  judge: { provider: openai, model: gpt-4o-mini, "
        "api_key: \"{{secrets.TAMESU_TEST_NO_KEY}}\" }\n")
    write(tmp_path, TARGET + "models:\n  grader: { provider: anthropic, model: claude-x, "
          "api_key: \"{{env.TAMESU_TEST_NO_ENV}}\" }\n"
          "tests:\n  - name: a\n    target: api\n    scenario: { script: [ {say: hi} ] }\n")
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert ("tamesu.yaml:3:59: models.judge.api_key: secret TAMESU_TEST_NO_KEY is not set (environment or .env): "
            "a test that calls this model will be an error") in checked.stderr, checked.stderr
    assert ("suite.yaml:6:60: models.grader.api_key: environment variable TAMESU_TEST_NO_ENV is not set: a test "
            "that calls this model will be an error") in checked.stderr, checked.stderr


def test_json_style_surrogate_escapes_make_their_character_and_a_lone_half_is_refused(tmp_path: Path,
                                                                                       tamesu) -> None:
    # `"\ud83d\ude00"` (an emoji as JSON writes it) validated, then every turn was "internal error:
    # UnicodeEncodeError: ... surrogates not allowed"
    from tamesu.suite.yaml_reader import load_yaml

    test = 'tests:\n  - { name: a, target: api, scenario: { script: [ { say: "hi SAID" } ] } }\n'
    write(tmp_path, TARGET + test.replace("SAID", "\\ud83d\\ude00"))
    assert load_yaml(tmp_path / "suite.yaml").data["tests"][0]["scenario"]["script"][0]["say"] == "hi \U0001F600"
    write(tmp_path, TARGET + test.replace("SAID", "\\ud83d"))
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "suite.yaml:6:62: \\ud83d is half of a UTF-16 pair without its other half: write the character itself" \
        in checked.stdout + checked.stderr


def test_a_model_or_mcp_targets_model_and_system_file_are_checked_where_written(tmp_path: Path, tamesu) -> None:
    # before: validate said ok; the run was exit 3 at every test ("no model named ...", "cannot read system_file"),
    # an mcp server started first
    (tmp_path / "suite.yaml").write_text("""\
models:
  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }
targets:
  a: { type: model, model: bot, system_file: nope.txt }
  b: { type: model, model: nosuchmodel, fallback: nosuchfallback }
  c: { type: mcp, command: "true" }
  d: { type: model, model: "openai:gpt-4o-mini" }
tests:
  - { name: t, target: a, scenario: { script: [ { say: hi } ] } }
""")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert "suite.yaml:4:46: targets.a.system_file: no file nope.txt (system_file is read from the suite's folder)" \
        in said, said
    assert "suite.yaml:5:28: targets.b.model: no model named 'nosuchmodel' under models: (bot; or write " \
        "provider:model)" in said, said
    assert "targets.b.fallback: no model named 'nosuchfallback'" in said
    assert "suite.yaml:6:6: targets.c: no model named 'target' under models: (bot; or write provider:model) (a " \
        "model or mcp target without model: uses models.target)" in said, said
    assert "targets.d" not in said


def test_validate_says_the_warnings_beside_the_problems(tmp_path: Path, tamesu) -> None:
    # before: with a problem in the suite its warnings (a secret not set) were not said: fixing the problems
    # uncovered them one round later
    write(tmp_path, TARGET.replace("url: http://127.0.0.1:9/chat",
                                   'url: http://127.0.0.1:9/chat\n    headers: { X: "{{secrets.TAMESU_TEST_UNSET}}" }')
          + "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n"
          + "  - { name: b, target: nowhere, scenario: { script: [ { say: hi } ] } }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "targets.api.headers.X: secret TAMESU_TEST_UNSET is not set" in checked.stderr, checked.stderr
    assert "tests[1].target: no target named 'nowhere'" in checked.stderr


def test_symlink_loops_are_one_line_not_an_internal_error(tmp_path: Path, tamesu) -> None:
    # `ln -s .env .env` and a JSONL file linked to itself: "internal error: RuntimeError: Symlink loop"
    (tmp_path / ".env").symlink_to(".env")
    (tmp_path / "t.jsonl").symlink_to("t.jsonl")
    (tmp_path / "tamesu.yaml").write_text('targets:\n  shop: { type: rest, url: "http://127.0.0.1:9/x" }\n')
    write(tmp_path, TARGET.replace("url: http://127.0.0.1:9/chat",
                                   'url: http://127.0.0.1:9/chat\n    headers: { X: "{{secrets.TAMESU_TEST_NOPE}}" }')
          + "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n")
    suite = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert suite.returncode == 0 and "internal error" not in suite.stderr, suite.stderr
    assert "secret TAMESU_TEST_NOPE is not set (environment or " in suite.stderr
    cases = tamesu(["validate", "t.jsonl", "-n", "shop"], cwd=tmp_path)
    assert cases.returncode == 2 and "internal error" not in cases.stderr, cases.stderr
    assert "t.jsonl:1:1: cannot read the file: a symlink loop" in cases.stderr


def test_templates_a_script_can_never_fill_are_refused_where_written(tmp_path: Path, tamesu) -> None:
    # validated, then the test failed on the agent: "the next user turn could not be written: {{run.nope}} has no
    # value"
    write(tmp_path, TARGET + "tests:\n  - { name: a, target: api, scenario: { script: [ { say: "
                             "'A{{ run.nope }}B {{listen.url}} {{run.number}}' } ] } }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert "tests[0].scenario.script[0].say: bad template {{run.nope}}: a run has run.id and run.number" in said
    assert "bad template {{listen.url}}: it has a value in a target's request or a model target's tool result, " \
           "never in a test's script" in said
    assert "run.number" not in said.replace("run.id and run.number", "")


def test_a_session_value_no_session_open_captures_is_refused_where_written(tmp_path: Path, tamesu) -> None:
    # validated, then each run was `internal error: TemplateError: {{session.token}} has no value`
    write(tmp_path, TARGET + "    headers: { Authorization: 'Bearer {{session.token}}' }\n"
                             "  opened:\n    type: rest\n    url: http://127.0.0.1:9/c/{{session.conv}}\n"
                             "    session: { open: { url: /o, capture: { id: $.id } } }\n"
                             "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n"
                             "  - { name: b, target: opened, scenario: { script: [ { say: hi } ] } }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert ("suite.yaml:5:31: targets.api.headers.Authorization: bad template {{session.token}}: the target has no "
            "session.open to capture it") in said, said
    assert ("suite.yaml:8:10: targets.opened.url: bad template {{session.conv}}: session.open captures no 'conv' "
            "(it captures id)") in said, said


def test_a_session_value_nothing_fills_is_refused_on_every_type(tmp_path: Path, tamesu) -> None:
    # a realtime or a2a target's `{{session.token}}` validated (session.open was rest's, voice's and pipecat's
    # alone, and warned as "a key of pipecat targets") and each run was an error, `is not available here`
    write(tmp_path, "targets:\n"
                    "  rt: { type: realtime, url: 'ws://127.0.0.1:9/v1', headers: { Authorization: 'Bearer "
                    "{{session.token}}' } }\n"
                    "  desk: { type: a2a, url: 'http://127.0.0.1:9/{{session.id}}' }\n"
                    "  line: { type: sip, to: 'sip:a@127.0.0.1', trigger: { run: 'dial {{session.uri}} "
                    "{{session.x}}' } }\n"
                    "  call:\n    type: voice\n    url: 'ws://127.0.0.1:9/{{session.call}}'\n"
                    "    session: { open: { url: 'http://127.0.0.1:9/o', capture: { id: $.id } } }\n"
                    "    audio: { encoding: pcm16, sample_rate: 16000, frames: binary }\n"
                    "tests:\n" + "".join(f"  - {{ name: {t}, target: {t}, scenario: {{ script: [ {{ say: x }} ] }} }}\n"
                                         for t in ("rt", "desk", "line", "call")))
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = [line for line in checked.stderr.splitlines() if line.startswith("suite.yaml:")]
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert said == [
        "suite.yaml:2:79: targets.rt.headers.Authorization: bad template {{session.token}}: the target has no "
        "session.open to capture it",
        "suite.yaml:3:27: targets.desk.url: bad template {{session.id}}: the target has no session.open to capture it",
        "suite.yaml:4:61: targets.line.trigger.run: bad template {{session.x}}: the target has no session.open to "
        "capture it (a sip target fills only uri itself)",
        "suite.yaml:7:10: targets.call.url: bad template {{session.call}}: session.open captures no 'call' (it "
        "captures id)",
    ], checked.stderr
    assert "'session' is a key of" not in checked.stderr  # every type takes session.open now


def test_a_capture_in_the_first_step_said_before_the_agent_speaks_is_refused(tmp_path: Path, tamesu) -> None:
    # validated, then each run failed "the next user turn could not be written", blamed on the agent (exit 1)
    write(tmp_path, TARGET + "  bot: { type: voice, url: 'ws://127.0.0.1:9/s', audio: { encoding: pcm16, "
                             "sample_rate: 16000, frames: binary } }\n"
                             "tests:\n  - name: a\n    target: api\n    capture: [ { name: x, regex: 'ORD-[0-9]+' } ]\n"
                             "    scenario: { script: [ { say: 'hi {{captured.x}}' }, { say: '{{captured.x}}?' } ] }\n"
                             "  - name: b\n    target: api\n    capture: [ { name: x, regex: 'ORD-[0-9]+' } ]\n"
                             "    scenario: { script: [ { wait_for: 'ORD', say: '{{captured.x}}' } ] }\n"
                             "  - name: c\n    target: bot\n    capture: [ { name: x, regex: 'ORD-[0-9]+' } ]\n"
                             "    scenario: { script: [ { say: '{{captured.x}}' } ] }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = [line for line in checked.stderr.splitlines() if line.startswith("suite.yaml:")]
    assert checked.returncode == 2, checked.stdout + checked.stderr
    # after a wait_for, or on a target whose agent may greet first (a voice call), a capture can have a value
    assert said == ["suite.yaml:10:34: tests[0].scenario.script[0].say: bad template {{captured.x}}: the first step "
                    "is said before the agent's first turn, so nothing is captured yet"], checked.stderr


def test_a_zero_timeout_is_refused_where_written(tmp_path: Path, tamesu) -> None:
    # `timeout: 0s` validated, and every run then failed as the agent's fault
    write(tmp_path, TARGET.replace("url: http://127.0.0.1:9/chat", "url: http://127.0.0.1:9/chat\n    turn_timeout: 0s")
          + "tests:\n  - { name: a, target: api, timeout: 0s, scenario: { script: [ { say: hi } ] } }\n")
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert "targets.api.turn_timeout: input should be greater than 0, got 0.0" in said, said
    assert "tests[0].timeout: input should be greater than 0, got 0.0" in said
    # NaN read "a duration cannot be negative"
    write(tmp_path, TARGET + "tests:\n  - { name: a, target: api, timeout: .nan,\n"
                             "      scenario: { script: [ { say: hi } ] } }\n")
    nan = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert "tests[0].timeout: a duration is a number of seconds, not NaN" in nan.stdout + nan.stderr


def test_an_empty_or_a_list_key_is_a_problem_not_a_name(tmp_path: Path, tamesu) -> None:
    # `~:` made a target named "None", `? [a, b]` one named "('a', 'b')"
    for key, said in (("~", "suite.yaml:2:3: an empty key (~ or null): a key is a name"),
                      ("? [a, b]\n  ", "suite.yaml:2:5: a key that is a list or a mapping: a key is a name")):
        write(tmp_path, f"targets:\n  {key}: {{ type: rest, url: 'http://127.0.0.1:9/x' }}\n"
                        "tests:\n  - { name: t, target: b, scenario: { script: [ { say: hi } ] } }\n")
        checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
        assert checked.returncode == 2 and said in checked.stdout + checked.stderr, checked.stdout + checked.stderr


def test_validate_says_the_problems_of_every_stage_at_once(tmp_path: Path, tamesu) -> None:
    # before: a wrong `traces:` hid every other problem of the suite, and a browser target with a wrong key
    # hid its tests' steps: three rounds of fixing to see what one could have shown
    (tmp_path / "suite.yaml").write_text("""\
traces: { receive: "127.0.0.1:4318", query: { tempo: "http://127.0.0.1:3200" } }
targets:
  a: { type: grpc, url: "grpc://127.0.0.1:1", mode: streaming }
  page: { type: browser, url: "http://127.0.0.1:1/", engine: firefox }
tests:
  - { name: t, target: a, scenario: { script: [ { say: hi } ] } }
  - name: clicks
    target: page
    steps:
      - { action: clik, selector: "#a" }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "suite.yaml:1:9: traces: receive or query, not both: spans come either to tamesu's receiver " \
                       "or from a backend it asks", lines
    assert "suite.yaml:3:53: targets.a.mode: input should be 'stream' or 'unary', got 'streaming' (did you mean " \
           "'stream'?)" in lines, lines
    assert any(line.startswith("suite.yaml:4:") and "targets.page.engine: engine 'firefox' is not available"
               in line for line in lines), lines
    assert any(line.startswith("suite.yaml:10:19: tests[1].steps[0].action: input should be ") and
               line.endswith("got 'clik' (did you mean 'click'?)") for line in lines), lines
    assert lines[-1] == "4 problems found"


def test_validate_says_every_problem_of_tamesu_yaml_at_once(tmp_path: Path, tamesu) -> None:
    # before: three rounds of fixing: a model's key, then a fake rule's, then the targets'
    (tmp_path / "tamesu.yaml").write_text("""\
targets:
  geo:
    type: rest
    url: "http://127.0.0.1:9/chat"
    respnse: { text: $.reply }
    turn_timeout: fast
models:
  judge: { provider: fake, rules: [ { rubric: "x", pas: true } ] }
  sim: { provider: openai, model: gpt-4o-mini, temperature: "hot" }
""")
    (tmp_path / "t.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    result = tamesu(["validate", "t.jsonl", "-n", "geo"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "tamesu.yaml:5:5: targets.geo.respnse: not a rest target key (did you mean 'response'?)",
        "tamesu.yaml:6:19: targets.geo.turn_timeout: expected a duration such as 30s or 500ms, got 'fast'",
        "tamesu.yaml:8:52: models.judge.rules[0].pas: not a judge rule key (did you mean 'pass'?)",
        "tamesu.yaml:9:61: models.sim.temperature: expected a number, got 'hot'",
        "4 problems found"], result.stderr


def test_a_model_named_nowhere_and_a_base_url_with_no_scheme_are_suite_errors(tmp_path: Path, tamesu) -> None:
    # before: validate said ok; the run was exit 3 at its first judge ("no model named ..."), or retried a
    # schemeless base_url four times before "the URL's scheme '' is not http(s)"
    write(tmp_path, TARGET + """models:
  judge: { provider: fake, rules: [ { pass: true, reason: fine } ] }
  local: { provider: openai, model: m, base_url: "127.0.0.1:8000/v1" }
tests:
  - name: a
    target: api
    scenario: { script: [ { say: hi } ] }
    assert: [ { judge: { rubric: "x", model: nosuchmodel } } ]
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    said = result.stderr
    assert "models.local.base_url: base_url starts with http:// or https://, got '127.0.0.1:8000/v1'" in said, said
    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().replace('"127.0.0.1', '"http://127.0.0.1'))
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "tests[0].assert[0].judge.model: no model named 'nosuchmodel' under models: (judge, local; or write " \
           "provider:model)" in result.stderr, result.stderr


def test_a_base_url_with_credentials_is_refused_where_written(tmp_path: Path, tamesu) -> None:
    # before: "internal error: ValueError: Cannot combine AUTHORIZATION header with AUTH argument or credentials
    # encoded in URL" in every test that called the model (exit 3)
    write(tmp_path, TARGET + """models:
  local: { provider: openai, model: m, base_url: "http://user:pw@127.0.0.1:8000/v1" }
tests: []
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "models.local.base_url: base_url carries user:password@, which cannot go beside the API key's header" \
        in result.stderr, result.stderr
    assert "pw" not in result.stderr.replace("password", "")


def test_a_bound_that_is_not_finite_and_an_empty_path_are_refused_where_written(tmp_path: Path, tamesu) -> None:
    # before: all validated; `.nan` failed (or passed) every run, an empty path read the whole response, and a
    # bad path of `equals` or `type` was an internal error of every run
    write(tmp_path, TARGET + """defaults:
  slo: { turn_latency_ms_p95: .nan }
tests:
  - name: a
    target: api
    scenario: { script: [ { say: hi } ] }
    assert:
      - json_path: { path: '' }
      - json_path: { path: $.n, gt: .nan, lte: -.inf }
      - metric: { name: turns, equals: .inf }
      - http: { url: "http://127.0.0.1:9/", json_path: '' }
      - equals: { value: 1, path: '$$' }
      - type: { value: number, path: ' ' }
      - json_path: { path: $.n, equals: .nan }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    empty = "an empty JSONPath: write a path such as $.status, or $ for the whole response"
    assert result.stderr.splitlines() == [
        "suite.yaml:6:31: defaults.slo.turn_latency_ms_p95: input should be a finite number, got nan",
        f"suite.yaml:12:28: tests[0].assert[0].json_path.path: {empty}",
        "suite.yaml:13:37: tests[0].assert[1].json_path.gt: input should be a finite number, got nan",
        "suite.yaml:14:40: tests[0].assert[2].metric.equals: input should be a finite number, got inf",
        f"suite.yaml:15:56: tests[0].assert[3].http.json_path.path: {empty}",
        "suite.yaml:16:35: tests[0].assert[4].equals.path: invalid JSONPath '$$': unexpected token '$'",
        f"suite.yaml:17:38: tests[0].assert[5].type.path: {empty}",
        "suite.yaml:18:41: tests[0].assert[6].json_path.equals: nan is not a JSON number: write a number, or the "
        "text in quotes",
        "8 problems found"], result.stderr


def test_a_dotenv_line_that_is_not_key_value_is_a_warning_where_written(tmp_path: Path, tamesu) -> None:
    # before: left out (or read quote and all) in silence, and the secret it held was "not set" with no reason
    (tmp_path / ".env").write_text('export\n=x\nFOO BAR\nGOOD=1\nexport OK=2\nQ="abc\nR="abc" junk\n# c\nS=ok # y\n'
                                   'GOOD=2\n')
    write(tmp_path, TARGET + "tests:\n  - name: a\n    target: api\n"
                             "    scenario: { script: [ { say: '{{secrets.GOOD}} {{secrets.OK}}' } ] }\n")
    expected = ["warning: .env:1:1: not KEY=value: 'export' is left out",
                "warning: .env:2:1: no name before '=': the line is left out",
                "warning: .env:3:1: not KEY=value: 'FOO BAR' is left out",
                "warning: .env:6:3: a quote that is never closed: Q is read with its quote (a value of several lines "
                "is not read)",
                "warning: .env:7:1: text after the closing quote of R: quote the whole value, or start a comment with "
                "' #'",
                "warning: .env:10:1: GOOD is set again (first on line 4): this later value is used"]
    (tmp_path / "t.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "inpt": "hi"}\n')
    url = "http://127.0.0.1:9/x"
    # a suite and JSONL cases read one .env: said once; JSONL cases with a problem say it too
    for command in (["validate", "suite.yaml"], ["run", "suite.yaml"], ["validate", "t.jsonl", "-n", url],
                    ["test", "-i", "t.jsonl", "-n", url, "--timeout", "2s"],
                    ["validate", "suite.yaml", "t.jsonl", "-n", url], ["validate", "bad.jsonl", "-n", url]):
        result = tamesu(command, cwd=tmp_path)
        said = result.stdout + result.stderr
        assert [line for line in said.splitlines() if line.startswith("warning: .env")] == expected, said
        assert "Traceback" not in said


def test_validate_says_the_projects_and_the_suites_problems_at_once(tmp_path: Path, tamesu) -> None:
    # before: a problem of tamesu.yaml hid every suite's, an impossible date was a "YAML syntax error" that hid
    # the rest of its file, and a cases file said its first bad row only: four rounds of fixing
    (tmp_path / "tamesu.yaml").write_text("suites: [suite.yaml]\nparallel: lots\n"
                                          "models:\n  judge: { provider: fake, rulez: [] }\n")
    (tmp_path / "cases.csv").write_text("name,x\n,1\nb,1,2\nc\n" + "".join(f"d{i},1,2\n" for i in range(20)))
    write(tmp_path, TARGET + """tests:
  - name: a
    target: api
    persona: { colour: red }
    assert: [ { judge: polite } ]
  - name: b
    target: api
    quarantine: { until: 2026-02-30, reason: flaky }
  - { name: c, target: api, cases_file: cases.csv }
""")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    holds = "has more fields than its header (2): quote a value that holds ','"
    assert result.stderr.splitlines() == [
        "tamesu.yaml:2:11: parallel: expected a whole number, got 'lots'",
        "tamesu.yaml:4:28: models.judge.rulez: not a model key (did you mean 'rules'?)",
        "suite.yaml:8:16: tests[0].persona.colour: not a persona key (keys: name, style, language, voice, "
        "background, behaviors, facts)",
        "suite.yaml:12:26: tests[1].quarantine.until: input should be a valid date or datetime, day value is "
        "outside expected range, got '2026-02-30'",
        # the test's own problem beside its cases file's rows (a bad row hid it before)
        "suite.yaml:13:5: tests[2]: nothing plays the user: add scenario.script steps, or set models.simulator so "
        "the persona can speak",
        "cases.csv:2:1: name: row 2 has no name",
        f"cases.csv:3:5: row 3 {holds}",
        "cases.csv:4:2: row 4 has fewer fields than its header (2): x missing",
        *(f"cases.csv:{row}:{6 if row < 15 else 7}: row {row} {holds}" for row in range(5, 22)),
        "cases.csv:22:7: 3 more problems",
        "28 problems found"], result.stderr  # 5 and the cases file's 23: its "3 more" line counted 1 before
    # what the suites read of tamesu.yaml, left out, would make their problems up: its own are said alone
    (tmp_path / "tamesu.yaml").write_text("suites: [suite.yaml]\nvars: 5\n")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.stderr.splitlines() == ["tamesu.yaml:2:7: vars: input should be a valid dictionary, got 5",
                                          "1 problem found"], result.stderr


def test_a_value_every_member_of_a_union_refuses_is_one_line(tmp_path: Path, tamesu) -> None:
    # before: `skip: 5` was two lines at one place, "a valid string" and "a valid boolean"
    write(tmp_path, TARGET + "tests:\n  - { name: a, target: api, skip: 5, scenario: { script: [ { say: hi } ] } }\n"
                             "  - { name: b, target: api, skip: [x], scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.stderr.splitlines() == [
        "suite.yaml:6:35: tests[0].skip: expected text or a boolean (true, false), got 5 (read as a number: put it "
        "in quotes to keep it as written)",
        "suite.yaml:7:35: tests[1].skip: expected text or a boolean (true, false), got ['x']",
        "2 problems found"], result.stderr


def test_a_dangling_symlink_is_named_by_the_path_written(tmp_path: Path, tamesu) -> None:
    # before: a fake rules file linked to nothing was "nothere.yaml: file not found" (its target), and a suite
    # the project's glob found, linked outside the folder, was named by its absolute path
    (tmp_path / "rules.yaml").symlink_to("nothere.yaml")
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "link.yaml").symlink_to(tmp_path.parent / "gone" / "s.yaml")
    (tmp_path / "tamesu.yaml").write_text('suites: [suite.yaml, "more/*.yaml"]\n'
                                          "models:\n  sim: { provider: fake, rules: rules.yaml }\n")
    write(tmp_path, TARGET + "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.stderr.splitlines() == [
        "tamesu.yaml:3:33: models.sim.rules: fake rules file rules.yaml: file not found (a symlink to nothere.yaml, "
        "which does not exist)",
        f"more/link.yaml:1:1: file not found (a symlink to {tmp_path.parent / 'gone' / 's.yaml'}, which does not "
        "exist)",
        "2 problems found"], result.stderr


def test_a_mapping_where_a_text_or_boolean_or_a_block_goes_says_only_the_blocks_problems(tmp_path: Path,
                                                                                         tamesu) -> None:
    # before: `push: {url: ftp://x}` was two lines, "push: input should be a valid boolean" and
    # "push.PushSpec.url: ...", a class name the user never wrote in the path
    write(tmp_path, "targets:\n  t: { type: a2a, url: 'http://127.0.0.1:9/', push: { url: 'ftp://x' } }\n"
                    "  m: { type: model, model: { provider: fake, temprature: 2 } }\n"
                    "  page: { type: browser, url: 'http://127.0.0.1:9/', "
                    "chat: { input: { role: 5 }, messages: .m } }\n"
                    "tests:\n  - { name: a, target: t, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "suite.yaml:2:60: targets.t.push.url: url must start with http:// or https://",
        "suite.yaml:3:46: targets.m.model.temprature: not a model key (did you mean 'temperature'?)",
        "suite.yaml:4:77: targets.page.chat.input.role: input should be a valid string, got 5 (read as a number: put "
        "it in quotes to keep it as written)",
        "3 problems found"], result.stderr
    # a value no member takes is one line, the block named as what it is (before: "push.PushSpec: input should
    # be a valid dictionary or instance of PushSpec")
    write(tmp_path, "targets:\n  t: { type: a2a, url: 'http://127.0.0.1:9/', push: 5 }\n"
                    "  m: { type: model, model: [1] }\n"
                    "tests:\n  - { name: a, target: t, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.stderr.splitlines() == [
        "suite.yaml:2:53: targets.t.push: expected a boolean (true, false) or a mapping of keys, got 5",
        "suite.yaml:3:28: targets.m.model: expected text or a mapping of keys, got [1]",
        "2 problems found"], result.stderr


def test_a_url_of_the_wrong_scheme_is_a_problem_at_the_url(tmp_path: Path, tamesu) -> None:
    # before: an mcp url of another scheme (or none: `localhost:8080/mcp` reads as the scheme "localhost")
    # passed validate and every run was an infrastructure error, exit 3 ("UnsupportedProtocol: the URL's
    # scheme 'ftp' is not http(s)"); a rest or a2a url's problem pointed at the target's name, not at its url
    # (a browser's: every run exit 3, the page could not be opened)
    write(tmp_path, """models:
  judge: { provider: fake, rules: [ { pass: true, reason: fine } ] }
targets:
  r: { type: rest, url: "ftp://x/chat", request: { body: { m: "{{message}}" } }, response: { text: $.r } }
  a: { type: a2a, url: "ftp://x/a2a" }
  m: { type: mcp, url: "ftp://x/mcp", model: judge }
  n: { type: mcp, url: "localhost:8080/mcp", model: judge }
  ok: { type: mcp, url: "{{env.MCP_URL}}", model: judge }
  up: { type: mcp, url: "HTTP://127.0.0.1:9/mcp", model: judge }
  w: { type: browser, url: "ftp://x/shop" }
  wn: { type: browser, url: "localhost:8080/shop" }
  wok: { type: browser, url: "{{env.SHOP}}/cart" }
  wfile: { type: browser, url: "file:///srv/shop/index.html" }
tests:
  - { name: a, target: r, scenario: { script: [ { say: hi } ] } }
""")
    # set: an unused target's unset variable is a warning, as a used one's is in validate
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"MCP_URL": "http://127.0.0.1:9/mcp",
                                                                  "SHOP": "http://127.0.0.1:9"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:4:25: targets.r.url: url must start with http://, https://, ws:// or wss://",
        "suite.yaml:5:24: targets.a.url: url must start with http://, https://, grpc:// or grpcs://",
        "suite.yaml:6:24: targets.m.url: an mcp url is http:// or https:// (the server's streamable HTTP endpoint)",
        "suite.yaml:7:24: targets.n.url: an mcp url is http:// or https:// (the server's streamable HTTP endpoint)",
        "suite.yaml:10:28: targets.w.url: a browser url is the page to open: http://, https:// or file:// (or "
        "about:, data:)",
        "suite.yaml:11:29: targets.wn.url: a browser url is the page to open: http://, https:// or file:// (or "
        "about:, data:)",
        "6 problems found"], result.stderr


def test_an_empty_skill_is_a_problem_where_written(tmp_path: Path, tamesu) -> None:
    # before: validate said ok, and every run was an infrastructure error (exit 3), "the agent card (...) does not
    # offer the skill ''"
    write(tmp_path, "targets:\n  a: { type: a2a, url: 'http://127.0.0.1:9/a2a', skill: '' }\n"
                    "tests:\n  - { name: a, target: a, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:2:57: targets.a.skill: string should have at least 1 character, got ''",
        "1 problem found"], result.stderr


def test_a_var_a_target_names_says_which_test_lacks_it(tmp_path: Path, tamesu) -> None:
    # before: "no var 'order' in the test, its cases, ..." at the target's line, which many tests share: which
    # one lacked it was left to guess
    write(tmp_path, TARGET + "    request: { body: { message: '{{message}} {{vars.order}}' } }\n"
          "tests:\n  - { name: has it, target: api, vars: { order: ORD-1 }, scenario: { script: [ { say: hi } ] } }\n"
          "  - { name: lacks it, target: api, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:5:33: targets.api.request.body.message: bad template {{vars.order}}: no var 'order' in test "
        "'lacks it' (tests[1]), its cases, the suite or the project",
        "1 problem found"], result.stderr


def test_a_capture_a_target_names_that_a_test_never_makes_is_a_warning(tmp_path: Path, tamesu) -> None:
    # before: validate said ok, and every run of the test that captures no `order` was an infrastructure error
    # (exit 3): "turn 1: the request could not be written: {{captured.order}} has no value". A warning, not a
    # problem: a realtime target's tool_results may name a capture for a tool only the capturing tests call
    write(tmp_path, TARGET + "    request: { body: { message: '{{message}}', order: '{{captured.order}}' } }\n"
          "tests:\n  - { name: captures it, target: api, capture: [ { name: order, regex: 'ORD-\\d+' } ],\n"
          "      scenario: { script: [ { say: hi } ] } }\n"
          "  - { name: never does, target: api, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "warning: suite.yaml:5:55: targets.api.request.body.order: {{captured.order}}: test 'never does' "
        "(tests[1]) captures no 'order': every turn that renders this fails"], result.stderr


def test_a_url_an_environment_variable_makes_unsendable_is_said_where_written(tmp_path: Path, tamesu) -> None:
    # before: `SHOP_URL=127.0.0.1:8080` validated ok and each test of the run was an error (exit 3) with no place
    write(tmp_path, 'targets:\n  shop: { type: rest, url: "{{env.SHOP_URL}}/chat" }\n'
                    "tests:\n  - name: a\n    target: shop\n    scenario: { script: [ {say: hi} ] }\n")
    for value, said in [
        ("127.0.0.1:8080", "'127.0.0.1:8080/chat': no scheme: write where it is, from http://, https://, ws:// or "
                           "the like (a path alone names no server)"),
        ("http://me:pw@127.0.0.1:99999", "'http://***@127.0.0.1:99999/chat': the port is not a number from 1 to "
                                         "65535"),  # the password in it never said
    ]:
        for command in ("validate", "run"):
            done = tamesu([command, "suite.yaml", "--out", "out"][:2 if command == "validate" else 4], cwd=tmp_path,
                          env={"SHOP_URL": value})
            assert done.returncode == 2, done.stdout + done.stderr
            assert done.stderr.splitlines()[0] == f"suite.yaml:2:28: targets.shop.url: {{{{env.SHOP_URL}}}} made it " \
                                                  f"{said}", done.stderr
    fine = tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"SHOP_URL": "http://127.0.0.1:8080"})
    assert fine.returncode == 0, fine.stderr
    # made as the run makes it: a password with `/` in `user:password@` is percent-encoded, not a broken port
    write(tmp_path, 'targets:\n  shop: { type: rest, url: "http://shop:{{env.SHOP_PW}}@127.0.0.1:9/chat" }\n'
                    "tests:\n  - name: a\n    target: shop\n    scenario: { script: [ {say: hi} ] }\n")
    fine = tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"SHOP_PW": "S3cr3t+/=&Zq@x"})
    assert fine.returncode == 0, fine.stderr
